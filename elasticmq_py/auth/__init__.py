"""Client authentication: SigV4 verification (sigv4.py) against configured credentials
(credentials.py). Who may act on which account's queues is storage's rule (storage/access.py)."""
