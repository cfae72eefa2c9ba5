"""rxl: end-to-end receive locality for FreeBSD, and its harness."""

__version__ = "0.1.0"
