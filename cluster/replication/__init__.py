"""The mutation stream: a master numbers batches of mutations and streams them to replicas.

Sans-I/O: ``MasterReplicator`` and ``ReplicaApplier`` take events (a client operation's
mutations, a frame from a peer, the passing of time) and return actions (send a frame, complete
client operations, start a state transfer, throttle producers). The runtime binds them to ZeroMQ
and the event loop; the simulator binds the same code to a simulated network and clock.
"""
