"""The lab (`ddplab run`): a profile's stages (``profiles``) run one after another into one report (``run``), and
the orphan sweep (``clean``) that the lab and `ddplab clean` share."""
