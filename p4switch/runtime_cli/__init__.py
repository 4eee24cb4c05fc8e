"""simple_switch_CLI for p4switch: BMv2's runtime command language over its Thrift API."""
