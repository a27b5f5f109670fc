"""A PyTorch Lightning job (its DDP strategy) broken on purpose, for the fault table's training-code axis:

    ddplab launch --nproc-per-node 3 --hang-timeout 5 -m ddplab.drills.lightning_job --fault stall

Lightning finds the job through torchrun's variables and calls init_process_group and DDP itself. Each rank
reads data of its own (no distributed sampler, so that a rank can run out first).
"""

from __future__ import annotations

import os

from . import faults as fault_table


def main(argv: list[str] | None = None) -> None:
    args, faults = fault_table.framework_job("ddplab.drills.lightning_job", __doc__, argv)
    import lightning as L

    from ddplab.workloads.ddp_train import build_model

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net, _ = build_model("mlp", faults.model_width(args.width))
            faults.watch_backward(self.net)

        def training_step(self, batch, batch_idx):
            if faults.at_step(batch_idx, self.device) == "stop":
                self.trainer.should_stop = True
            x, _ = batch
            return self.net(x).mean()

        def on_train_epoch_end(self):
            faults.data_ended(self.trainer.global_step)

        def configure_optimizers(self):
            import torch

            return torch.optim.SGD(self.parameters(), lr=0.001)

    loader = faults.loader(args.steps, args.batch, args.width)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    trainer = L.Trainer(accelerator="cpu", devices=local, num_nodes=int(os.environ.get("WORLD_SIZE", "1")) // local,
                        strategy="ddp", max_steps=args.steps, max_epochs=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        use_distributed_sampler=False)
    trainer.fit(Model(), loader)
    print(f"[rank {trainer.global_rank}] finished", flush=True)


if __name__ == "__main__":
    main()
