"""Benchmark scenario: a PyTorch training loop on the CPU, stopped inside its backward pass.

Usage: python torch_train.py    (the torch venv's python, tools/torch.sh)

A small MLP is trained on random data: forward, loss, `loss.backward()`, an SGD step, in a
loop. On step STOP_STEP a hook on the first layer's weight gradient, which autograd's engine
calls from libtorch's C++ (`torch::autograd::Engine::evaluate_function` and below), writes
"ready <pid>" to stdout (a pipe held by the benchmark driver) and blocks in os.read() on
stdin, which the driver keeps open and never writes; EOF on stdin (driver gone) ends it. The
main thread's stack is then Python (the loop, `backward`) over libtorch_python and libtorch_cpu
(the engine) over Python again (the hook): the "zebra" stack of a real training step.
"""

import os
import sys

STOP_STEP = 3


def block_forever(grad):
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    os.read(0, 1)
    return grad


def train_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def main():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(128, 64)
    y = torch.randint(0, 10, (128,))
    for step in range(STOP_STEP + 1):
        if step == STOP_STEP:
            model[0].weight.register_hook(block_forever)
        train_step(model, optimizer, loss_fn, x, y)
    sys.exit("torch_train.py: the hook did not block")


if __name__ == "__main__":
    main()
