"""cl-diag from Python, notebook style: measure two arrays, show a result, save and reload it,
compare two results, read values by attribute. The README's "Python API" section shows this
file's code.

    python docs/examples/api.py [OUT]      # OUT: where the outputs go (default: a temporary folder)
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

import cl_diag

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="cl-diag-"))

# Two views of 1,000 instances in R^32 (torch tensors work the same), two encoders' worth
rng = np.random.default_rng(0)
z1 = rng.standard_normal((1000, 32)).astype(np.float32)
labels = rng.integers(0, 10, size=1000)
tight = cl_diag.measure(z1, z1 + 0.2 * rng.standard_normal((1000, 32)), labels, n_ref=50_000)
loose = cl_diag.measure(z1, z1 + 1.0 * rng.standard_normal((1000, 32)), labels, n_ref=50_000)

# A result shows its headline: print(tight) is a few lines (a notebook shows it as a table)
print(tight)

# Read a value by attribute, or every statistic as a tidy frame
cross = tight.layers["embedding"].pairs["cross_view_negative"]
print(f"cross-view negatives below -1/(n_ref - 1): {cross.excessive_ratio:.1%} of {cross.count}")
frame = tight.to_frame()
print(frame[(frame.statistic == "mean") & (frame.split == "all")].to_string(index=False))

# The files `cl-diag analyze` writes, and the same typed result back
tight.save(out / "tight")
loose.save(out / "loose")
again = cl_diag.load(out / "tight" / "result.json")
assert again.to_json() == tight.to_json()  # the same bytes: the result round-trips exactly

# Two results side by side (results in memory and saved folders alike): report.md,
# report.html, comparison.csv; the comparison shows the runs' headline numbers
comparison = cl_diag.compare([tight, out / "loose"], out=out / "comparison")
print(comparison)
columns = ["label", "embedding/positive_mean", "embedding/cross_view_negative_var"]
print(comparison.frame[columns].to_string(index=False))
print(f"report: {comparison.report_html}")
