"""Dependencies: what an agent may ask for, and (later) how approved packages are installed."""
