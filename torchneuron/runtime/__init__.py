"""Runtime layer: device profiles (the one table of device facts), configuration from the
environment (the one place environment variables are read), and the autograd thread setting."""
