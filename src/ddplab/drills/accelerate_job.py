"""A Hugging Face Accelerate job broken on purpose, for the fault table's training-code axis:

    ddplab launch --nproc-per-node 3 --hang-timeout 5 -m ddplab.drills.accelerate_job --fault stall

Accelerate finds the job through torchrun's variables and wraps the model in DDP itself; the loop is its
documented one. Each rank reads data of its own (the loader is not prepared, so that a rank can run out first).
"""

from __future__ import annotations


from . import faults as fault_table


def main(argv: list[str] | None = None) -> None:
    args, faults = fault_table.framework_job("ddplab.drills.accelerate_job", __doc__, argv)
    import torch
    from accelerate import Accelerator

    from ddplab.platform import available_accelerator
    from ddplab.workloads.ddp_train import build_model

    device_type, _ = available_accelerator(torch)  # torch 2.4 and 2.5 have no torch.accelerator
    accelerator = Accelerator(cpu=device_type is None)
    model, _ = build_model("mlp", faults.model_width(args.width))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    model, optimizer = accelerator.prepare(model, optimizer)
    faults.watch_backward(model)
    loader = faults.loader(args.steps, args.batch, args.width)
    steps = 0
    for x, _ in loader:
        if faults.at_step(steps, accelerator.device) == "stop":
            break
        optimizer.zero_grad()
        loss = model(x.to(accelerator.device)).mean()
        accelerator.backward(loss)
        optimizer.step()
        steps += 1
    else:
        faults.data_ended(steps)
    print(f"[rank {accelerator.process_index}] finished", flush=True)
    accelerator.end_training()


if __name__ == "__main__":
    main()
