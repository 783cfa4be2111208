"""Pilot (run from the repository root: python ctx.py WINDOW UNROLL STEPS THREADS BATCH): does attention over the context's true features (EAGLE proper) raise the head's
teacher-forced agreement, against the same network whose attention sees only its own path (v2)?"""
import math, sys, time, random, json
import torch, torch.nn.functional as F
from specviz.head.v2 import DraftHead2, _rms
from specviz.training.head2_train import new_head2
from specviz.training.head_train import vocab_subset
from specviz.head.model import target_parts
from specviz.loading.loader import load
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
W = int(sys.argv[1]); U = int(sys.argv[2]); STEPS = int(sys.argv[3])
D = "/work/headdata2/"
files = ["prompts_train-708dae8ec00f-t0.0-s0-e1-n128-a2-a15.pt", "prompts_train_3-8e10d663ca83-t0.0-s0-e1-n128-a2-a15.pt",
         "prompts_train_4-4e6e27a43f20-t0.0-s0-e1-n128-a2-a15.pt", "prompts_train-708dae8ec00f-t0.7-s1-e1-n128-a2-a15.pt"]
seqs = []
for f in files:
    seqs += torch.load(D + f)
held = seqs[len(seqs) - 746 - 150: len(seqs) - 746]  # last 150 greedy answers of train_4
train = seqs[: len(seqs) - 746 - 150] + seqs[len(seqs) - 746:]
print(len(train), len(held), flush=True)
target = load("bundled")
embed, _, lm_head = target_parts(target.model)
vocab = vocab_subset(train, 12288, target.vocab_size)
head = new_head2(target.model, vocab, 0)
w_sub = lm_head.weight.detach()[vocab].float()
CROP = 64

def batch_of(ss):
    rows = []
    for s in ss:
        n = len(s["feats"]); first = s["prompt_len"] - 1; a = max(0, first - CROP)
        rows.append((s, a, first, n))
    L = max(n - a for _, a, _, n in rows)
    B, d = len(rows), head.cfg.hidden
    G = torch.zeros(B, L, 3 * d); T = torch.zeros(B, L + U + 1, dtype=torch.long); P = torch.full((B, L + U), -1, dtype=torch.long)
    valid = torch.zeros(B, L, dtype=torch.bool); n_of = torch.zeros(B, dtype=torch.long); lossok = torch.zeros(B, L, dtype=torch.bool)
    Fm = torch.zeros(B, L + U, d)
    for b, (s, a, first, n) in enumerate(rows):
        m = n - a
        G[b, :m] = torch.cat([s["aux"][a:n].float().flatten(1), s["feats"][a:n].float()], -1)
        Fm[b, :m] = s["feats"][a:n].float()
        t = s["tokens"][a:n + 1]; T[b, :len(t)] = t
        valid[b, :m] = True; n_of[b] = m
        lossok[b, first - a: m] = True
    return G, T, Fm, valid, n_of, lossok

def rope(x, pos):  # x [B,H,L,D], pos [L]
    half = head.cfg.head_dim // 2
    freq = head.cfg.rope_theta ** (-torch.arange(half, dtype=torch.float32) / half)
    ang = pos[:, None].float() * freq
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    turned = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + turned * sin

def run(G, T, Fm, valid, n_of, lossok):
    B, L, _ = G.shape; H, Dh = head.cfg.heads, head.cfg.head_dim; eps = head.cfg.eps
    pos = torch.arange(L)
    # context mask: query i sees i' with i-W < i' <= i, i' valid
    ctxmask = (pos[None, :] <= pos[:, None]) & (pos[None, :] > pos[:, None] - W)
    ctxmask = (ctxmask[None, None] & valid[:, None, None, :]) | torch.eye(L, dtype=torch.bool)[None, None]
    h = head.root(G)
    k1 = v1 = None; diag_k, diag_v = [], []
    total, agree = 0.0, []
    for s in range(1, U + 1):
        with torch.no_grad():
            e = embed(T[:, s: L + s]).float()
            tgt = Fm[:, s: L + s]
            p = torch.softmax(tgt @ w_sub.T, -1)
        u = head.fc(torch.cat([h, e], -1))
        q, k, v = head.qkv(_rms(u, head.attn_norm, eps)).view(B, L, 3, H, Dh).permute(2, 0, 3, 1, 4)
        q = rope(q, pos + s - 1); k = rope(k, pos + s - 1)
        if s == 1:
            k1, v1 = k, v
            sc = (q @ k1.transpose(-1, -2)) / math.sqrt(Dh)
            sc = sc.masked_fill(~ctxmask, float("-inf"))
            att = torch.softmax(sc, -1)
            a = att @ v1
        else:
            diag_k.append(k); diag_v.append(v)
            # context strictly before the step-1 position i... i' <= i (includes K1[i])
            sc = (q @ k1.transpose(-1, -2)) / math.sqrt(Dh)
            sc = sc.masked_fill(~ctxmask, float("-inf"))
            dg = torch.stack([(q * kk).sum(-1) for kk in diag_k], -1) / math.sqrt(Dh)  # [B,H,L,s-1]
            att = torch.softmax(torch.cat([sc, dg], -1), -1)
            a = att[..., :L] @ v1 + sum(att[..., L + r, None] * diag_v[r] for r in range(len(diag_k)))
        u = u + head.o(a.transpose(1, 2).reshape(B, L, H * Dh))
        m = _rms(u, head.mlp_norm, eps)
        h = u + head.down(F.silu(head.gate(m)) * head.up(m))
        logits = _rms(h, head.out_norm, eps) @ w_sub.T
        ok = lossok & (pos[None] + s <= n_of[:, None] - 1)
        ce = -(p * torch.log_softmax(logits, -1)).sum(-1)
        total = total + ce[ok].mean()
        agree.append(logits.argmax(-1).eq(p.argmax(-1))[ok].float().mean().item())
    return total / U, agree

opt = torch.optim.AdamW(head.parameters(), lr=1e-3, weight_decay=0.01)
warm = max(1, STEPS // 20)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS)))
rng = random.Random(0); BS = int(sys.argv[5]) if len(sys.argv) > 5 else 8
t0 = time.time()
def evaluate():
    head.eval(); tot = [0.0] * U; cnt = 0
    with torch.no_grad():
        for i in range(0, len(held), 16):
            _, ag = run(*batch_of(held[i:i + 16])); tot = [x + y for x, y in zip(tot, ag)]; cnt += 1
    head.train(); return [round(x / cnt, 4) for x in tot]
for step in range(STEPS):
    loss, ag = run(*batch_of(rng.sample(train, BS)))
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0); opt.step(); sched.step()
    if (step + 1) % 50 == 0:
        print(f"step {step+1} ce {loss.item():.3f} agree {[round(a,2) for a in ag]} {time.time()-t0:.0f}s", flush=True)
    if (step + 1) % 200 == 0 or step + 1 == STEPS:
        print("HELD", step + 1, evaluate(), flush=True)
torch.save(head.state_dict(), f"/work/pilot/ctx-W{W}-U{U}-S{STEPS}.pt")
