"""Jobs across machines, and where a job listens: the parts that do not depend on the launcher's internals. Each
module's docstring says its part. Nothing here names a vendor; the platform layer supplies the socket variables.
"""
