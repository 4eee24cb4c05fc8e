"""The project's figures: how every plot (the demo's, sim/'s) is drawn and written as a PNG."""
