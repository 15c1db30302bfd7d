"""A load generator for SQS endpoints that is not boto3: raw keep-alive HTTP/1.1, JSON 1.0 and
Query protocols, N connections over one or more worker processes, every response validated.

- ``sqs``: request bytes and response checks (drivers), independent of I/O
- ``runner``: the asyncio and blocking clients, and the worker-process pool
- ``servers``: the processes under test (ours, the trivial handler, moto, sqslite)
- ``trivial``: the trivial handler on elasticmq-py's own HTTP stack
"""
