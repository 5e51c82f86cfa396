"""cl-diag's Monitor in a minimal lightly SimCLR loop (plain PyTorch, as lightly's SimCLR tutorial).

The loop is lightly's: a ResNet-18 backbone, ``SimCLRProjectionHead``, ``NTXentLoss`` and
``SimCLRTransform``; the data are torchvision's ``FakeData`` (random images made in memory, so
nothing is downloaded; give any image dataset instead). The three lines marked ``cl-diag`` add
the in-batch pair statistics: positives, cross-view and within-view negatives, the fraction of
negatives below delta = -1/(n - 1) and the VRN value, one row every ``--log-every`` steps.

    python docs/examples/lightly_monitor.py --steps 40 --log-every 10 [--csv metrics.csv]
"""

import argparse

import torch
import torchvision
from lightly.loss import NTXentLoss
from lightly.models.modules import SimCLRProjectionHead
from lightly.transforms import SimCLRTransform
from torch import nn

import cl_diag

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--images", type=int, default=512, help="size of the (fake) training set")
parser.add_argument("--image-size", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--log-every", type=int, default=10)
parser.add_argument("--csv", default=None, help="write the monitor's rows here")
args = parser.parse_args()
torch.manual_seed(0)


class SimCLR(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        resnet = torchvision.models.resnet18()
        self.backbone = nn.Sequential(*list(resnet.children())[:-1])
        self.projection_head = SimCLRProjectionHead(512, 512, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.projection_head(self.backbone(x).flatten(start_dim=1))


transform = SimCLRTransform(input_size=args.image_size, gaussian_blur=0.0)
dataset = torchvision.datasets.FakeData(
    size=args.images, image_size=(3, args.image_size, args.image_size), transform=transform
)
loader = torch.utils.data.DataLoader(
    dataset, batch_size=args.batch_size, shuffle=True, drop_last=True
)
model = SimCLR()
criterion = NTXentLoss(temperature=0.5)
optimizer = torch.optim.SGD(model.parameters(), lr=0.06)

monitor = cl_diag.Monitor(n_ref=len(dataset), log_every=args.log_every)  # cl-diag
step = 0
while step < args.steps:
    for (x0, x1), _ in loader:
        z0, z1 = model(x0), model(x1)
        loss = criterion(z0, z1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        monitor.update(z0, z1, loss=loss)  # cl-diag: on the device, no wait for it
        if (row := monitor.flush()) is not None:  # cl-diag: a dict every log_every steps
            print(
                f"step {row['step']:4d}  loss {row['loss']:.4f}  "
                f"cross-view neg. mean {row['cross_neg_mean']:+.4f} var {row['cross_neg_var']:.4f}"
                f"  below delta {row['cross_neg_excessive_ratio']:.1%}  vrn {row['vrn']:.4f}"
            )
        step += 1
        if step == args.steps:
            break
if args.csv:
    print(f"metrics: {monitor.to_csv(args.csv)}")
