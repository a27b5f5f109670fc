"""ddplab: prove a distributed-training communication stack on one machine.

Commands live in ``ddplab.commands``; the vendor knowledge in ``ddplab.platform``.
"""

__version__ = "0.1.0"
