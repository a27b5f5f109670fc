"""Real third-party training code under `ddplab launch`: a PyTorch Lightning DDP run on CPU (gloo), with one of
the faults users meet, on one rank (issue 17):

    ddplab launch --nproc-per-node 2 --hang-timeout 5 -- tests/thirdparty/lightning_ddp.py --fault raise

  --fault none           trains to the end
  --fault stall          a callback on the victim sleeps after --fault-step (the others wait in DDP's all_reduce)
  --fault raise          the victim's training_step raises
  --fault exit           the victim's training_step calls os._exit(7) (no traceback)

Lightning finds the job through torchrun's variables (its TorchElasticEnvironment), as under torchrun.
"""

import argparse
import os
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self, fault: str, victim: int, fault_step: int):
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)
        self.fault, self.victim, self.fault_step = fault, victim, fault_step

    def training_step(self, batch, batch_idx):
        if self.global_rank == self.victim and batch_idx == self.fault_step:
            print(f"[rank {self.global_rank}] injecting fault: {self.fault} at {time.time():.3f}", flush=True)
            if self.fault == "raise":
                raise ValueError(f"bad batch {batch_idx} on rank {self.global_rank}")
            if self.fault == "exit":
                os._exit(7)
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class StallAfter(L.Callback):
    def __init__(self, victim: int, step: int):
        self.victim, self.step = victim, step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if trainer.global_rank == self.victim and batch_idx == self.step:
            print(f"[rank {trainer.global_rank}] injecting fault: stall in a callback at {time.time():.3f}",
                  flush=True)
            time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", choices=("none", "stall", "raise", "exit"), default="none")
    parser.add_argument("--victim", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    data = TensorDataset(torch.randn(64 * args.steps, 32), torch.randint(0, 2, (64 * args.steps,)))
    callbacks = [StallAfter(args.victim, args.fault_step)] if args.fault == "stall" else []
    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")), strategy="ddp",
                        max_steps=args.steps, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)
    trainer.fit(Model(args.fault, args.victim, args.fault_step), DataLoader(data, batch_size=64))
    print(f"[rank {trainer.global_rank}] finished", flush=True)


if __name__ == "__main__":
    main()
