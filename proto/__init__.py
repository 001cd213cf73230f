"""Handrail's wire contract: the generated protobuf and gRPC modules.

Regenerate with ``python scripts/gen_protos.py``; never edit the ``*_pb2*`` files.
"""
