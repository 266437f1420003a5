# CORRECT (style): GSPO-token straight-through ratio s_it = sg[s_i] * exp(logp - sg(logp)), clipped per
# token (all tokens of a row share s_i), classic torch.minimum, seq-mean-token-mean over ALL B rows.
import torch


def _check(logp, old_logp, mask):
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)}")


def _mlr(logp, old_logp, valid):
    lp = logp.masked_fill(~valid, 0.0)
    op = old_logp.detach().masked_fill(~valid, 0.0)
    n = valid.sum(-1, keepdim=True)
    return (lp - op).sum(-1, keepdim=True) / n.clamp_min(1), lp, n


def sequence_ratio(logp, old_logp, mask):
    _check(logp, old_logp, mask)
    mlr, _, _ = _mlr(logp, old_logp, mask.bool())
    return mlr.squeeze(-1).exp()


def gspo_loss(logp, old_logp, advantages, mask, clip_eps=0.2):
    _check(logp, old_logp, mask)
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages {tuple(advantages.shape)} != ({logp.shape[0]},)")
    valid = mask.bool()
    mlr, lp, n = _mlr(logp, old_logp, valid)
    A = advantages.detach().to(logp.dtype).unsqueeze(-1)
    s_sg = mlr.detach().exp()                                   # [B,1], may be inf
    # keep an overflowing/clipped s out of the graph: the straight-through factor carries the gradient
    st = torch.exp(lp - lp.detach())                            # 1, with d/dlogp = 1
    s_tok = torch.where(torch.isinf(s_sg), torch.ones_like(s_sg), s_sg) * st
    s_tok = torch.where(torch.isinf(s_sg), torch.full_like(st, float("inf")).detach(), s_tok)
    surr1 = s_tok * A
    surr2 = s_tok.clamp(1 - clip_eps, 1 + clip_eps) * A
    # where s is inf (A > 0 here) surr1 = inf and the min is surr2 = (1+eps) A, constant
    tok = -torch.where(surr1 <= surr2, surr1, surr2)
    tok = tok.masked_fill(~valid, 0.0)
    per = tok.sum(-1) / n.squeeze(-1).clamp_min(1)
    return per.sum() / max(1, logp.shape[0])
