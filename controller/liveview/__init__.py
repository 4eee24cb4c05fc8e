"""fabricd's live view: the topology in a browser, with each directed link's load over the
last second (from the switches' port counters), the users of each link (vClos slices,
Ethereal steps, multicast trees, aggregation trees) and the links that are down.

`loads.LoadSampler` polls the counters, `usage.link_users` reads the intent, `svg.render`
draws both, and `server.start` serves the page (`fabricd --web 127.0.0.1:PORT`)."""
