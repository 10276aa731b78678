"""What scripts/stress and scripts/http-fuzz share: starting the built server (server.py),
speaking HTTP to it over sockets (rawhttp.py), and the tus / IETF resumable-upload
protocol details (resumable.py). Standard library only."""
