#!/bin/sh
# fabricd as compose runs it: serving its API over mutual TLS. The first start makes a CA, a
# server certificate (for 127.0.0.1 and localhost, where the API is reached: the published
# port on the host, the container itself) and one client certificate, into fabricd's volume;
# later starts reuse them. docker/fabricctl and the health check present the client pair.
set -e
dir=${FABRICD_TLS_DIR:-/var/lib/fabricd/tls}
if [ ! -s "$dir/client.key" ]; then
    umask 077
    mkdir -p "$dir"
    tmp=$(mktemp -d "$dir/.new.XXXXXX")
    key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    openssl req -x509 $key -days 3650 -subj "/CN=mlfabric compose CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$tmp/server.ext"
    printf 'extendedKeyUsage=clientAuth\n' > "$tmp/client.ext"
    for who in server client; do
        openssl req $key -subj "/CN=fabricd $who" -keyout "$tmp/$who.key" -out "$tmp/$who.csr" 2>/dev/null
        openssl x509 -req -in "$tmp/$who.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
            -CAcreateserial -days 3650 -extfile "$tmp/$who.ext" -out "$tmp/$who.pem" 2>/dev/null
    done
    rm -f "$tmp"/*.csr "$tmp"/*.ext "$tmp"/*.srl
    for f in ca.key ca.pem server.key server.pem client.pem client.key; do   # client.key last
        mv "$tmp/$f" "$dir/$f"
    done
    rmdir "$tmp"
    echo "fabricd: TLS certificates made in $dir" >&2
fi
exec "${FABRICD:-.venv/bin/fabricd}" --tls-cert "$dir/server.pem" --tls-key "$dir/server.key" \
    --tls-client-ca "$dir/ca.pem" "$@"
