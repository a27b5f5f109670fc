"""Reading reports back: the catalog of every kind of report (``catalog``: its types, its checks, its verdict
judged again), comparing reports, and a baseline drawn over a report (``comparison``)."""
