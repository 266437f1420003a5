"""judge.cases: the shared case generator of the tier tests."""

import math

import pytest
import torch

from judge import cases


def _g(seed=0):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("dtype", cases.DTYPES)
@pytest.mark.parametrize("value", [0.5, 2.0, 0.8, 1.2, 1.28, 0.25, 4.0])
def test_onto_bound_gives_every_float_whose_exp_is_the_bound(dtype, value):
    lo, hi = cases.onto_bound(value, dtype)
    target = torch.tensor(value, dtype=dtype)
    assert lo <= hi
    assert torch.exp(lo) == target and torch.exp(hi) == target
    # the next float outward is off the bound on each side
    assert torch.exp(torch.nextafter(lo, torch.tensor(-math.inf, dtype=dtype))) < target
    assert torch.exp(torch.nextafter(hi, torch.tensor(math.inf, dtype=dtype))) > target
    assert cases.exact_log(value, dtype).dtype == dtype


def test_onto_bound_finds_neighbours_a_log_space_comparison_misjudges():
    # float64: exp(0.6931471805599454) is exactly 2.0 although it is above log(2)
    lo, hi = cases.onto_bound(2.0, torch.float64)
    assert float(hi) > math.log(2.0)
    lo, hi = cases.onto_bound(0.5, torch.float32)
    assert float(lo) < math.log(0.5)


def test_exact_log_refuses_a_value_no_float_reaches():
    with pytest.raises(AssertionError, match="no log-ratio"):
        cases.exact_log(5.0, torch.float64)


def test_shapes_have_the_corners_and_one_large_batch_drawn_per_seed():
    a, b = cases.shapes(_g(1)), cases.shapes(_g(2))
    assert a != b  # drawn per seed
    for out in (a, b):
        assert out[0] == (1, 1) and out[1][0] == 1 and out[2][1] == 1
        B, L = out[-1]
        assert B * L >= cases.LARGE_TOKENS
        assert all(r * c < cases.LARGE_TOKENS for r, c in out[:-1])
    assert all(r * c < cases.LARGE_TOKENS for r, c in cases.shapes(_g(1), large=False))


@pytest.mark.parametrize("kind", cases.MASK_KINDS)
def test_as_mask_encodings(kind):
    valid = torch.tensor([[True, False], [False, True]])
    m = cases.as_mask(valid, kind)
    assert str(m.dtype).replace("torch.", "") == kind
    assert torch.equal(m != 0, valid)


def test_pad_fills_only_padding_and_broadcasts_over_heads():
    valid = torch.tensor([[True, False]])
    x = torch.zeros(1, 2, 3, dtype=torch.float32)
    out = cases.pad(x, valid, math.nan)
    assert bool(torch.isnan(out[0, 1]).all()) and bool((out[0, 0] == 0).all())


def test_scaled_tolerance_keeps_the_defaults_for_ordinary_magnitudes_and_grows_with_them():
    assert cases.scaled_tolerance(torch.float32, 1.0) == (2e-5, 1e-6)
    assert cases.scaled_tolerance(torch.float64, 1.0) == (1e-9, 1e-12)
    rtol, _ = cases.scaled_tolerance(torch.float32, 1000.0)
    # exp(u - logsumexp(u)) for u = (1000, 999) in float32 is off by ~6e-5 relative: admitted
    u = torch.tensor([1000.0, 999.0])
    got = torch.exp(u - torch.logsumexp(u, 0))
    want = torch.softmax(u.double(), 0)
    assert torch.allclose(got.double(), want, rtol=rtol, atol=0)
    assert rtol < 1e-2  # still rejects a wrong gate (a 0 or a 1)


def test_token_case_pads_and_empties_rows():
    c = cases.token_case(_g(3), 4, 5, torch.float32, mask_kind="float64", fill=math.inf, empty_rows=1)
    assert c["mask"].dtype == torch.float64 and c["logp"].dtype == torch.float32
    assert not bool(c["valid"][-1].any()) and bool(c["valid"][0, 0])
    assert bool(torch.isinf(c["old_logp"][~c["valid"]]).all())
    assert bool(torch.isfinite(c["rollout_logp"][c["valid"]]).all())
    assert cases.token_case(_g(3), 0, 5, torch.float64)["logp"].shape == (0, 5)


def test_strided_keeps_the_values_in_non_contiguous_layouts():
    g = torch.Generator().manual_seed(0)
    inputs = {"logp": torch.randn(3, 4, generator=g), "old": torch.randn(3, 4, generator=g, dtype=torch.float64),
              "mask": torch.rand(3, 4, generator=g) > 0.5, "adv": torch.randn(3, generator=g), "k": 2,
              "one": torch.tensor(1.0)}
    for column_major in (False, True):
        out = cases.strided(inputs, major=("logp",), column_major=column_major)
        for k, x in inputs.items():
            if isinstance(x, torch.Tensor):
                assert torch.equal(out[k], x) and out[k].dtype == x.dtype, k
        assert out["k"] == 2 and out["one"] is inputs["one"]  # not a tensor, or 0-d: as it is
        assert out["logp"].stride() == (1, 3) and out["adv"].stride() == (2,)
        assert out["old"].stride() == ((1, 3) if column_major else (8, 1))  # sliced from [3, 8]
        for k in ("logp", "old", "mask"):
            with pytest.raises(RuntimeError):
                out[k].view(-1)
