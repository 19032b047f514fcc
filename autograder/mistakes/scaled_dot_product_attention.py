"""Notebook 03: the mistakes students make, and correct answers written differently."""

from __future__ import annotations

from .variant import Variant

DEFAULT = "1.0 / math.sqrt(Q.shape[-1])"
SOFTMAX = "weights = torch.softmax(scores, dim=-1)"
CELL = "scaled_dot_product_attention"
CARRIED = "dot_product_attention"  # notebook 02's function, pasted in: stood in by PyTorch's in every test here
CALL = "return dot_product_attention(Q * scale, K, V)"


# The same function written out in full (scores, softmax, weighted values): a correct variant, and the
# text the mistakes made inside that formula edit.
WRITTEN_OUT = """
def scaled_dot_product_attention(Q, K, V, scale=None):
    if scale is None:
        scale = 1.0 / math.sqrt(Q.shape[-1])
    scores = (Q @ K.transpose(-2, -1)) * scale
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
"""


JACOBIAN = "softmax_jacobian"
TRAIN = "train_matching_attention"
JAC_RETURN = "return torch.diag_embed(weights) - outer"
SCORES = "(queries @ W_Q) @ (keys @ W_K).transpose(-2, -1) / math.sqrt(d_k)"
LOG_WEIGHTS = "torch.log_softmax(scores, dim=-1)"
LOSS = "loss = -log_weights.gather(-1, target.unsqueeze(-1)).mean()"
INIT = " / math.sqrt(d_model)).requires_grad_()"
LEARNS = ("test_matching_loss_is_cross_entropy", "test_matching_attention_learns")
ALL_JACOBIAN = ("test_softmax_jacobian_matches_autograd", "test_softmax_jacobian_batched", "test_softmax_jacobian_saturated")

MISTAKES = [
    Variant(
        "scales by 1/d_k instead of 1/sqrt(d_k)",
        CELL,
        edits=((DEFAULT, "1.0 / Q.shape[-1]"),),
        loses=("test_sdpa_scale_by_sqrt_dk", "test_sdpa_worked_example", "test_sdpa_matches_builtin"),
    ),
    Variant(
        "scales by 1/sqrt(d_v) instead of 1/sqrt(d_k)",
        CELL,
        edits=(("math.sqrt(Q.shape[-1])", "math.sqrt(V.shape[-1])"),),
        loses=("test_sdpa_scale_by_sqrt_dk", "test_sdpa_matches_builtin"),
    ),
    Variant(
        "ignores the scale argument",
        CELL,
        edits=((f"    if scale is None:\n        scale = {DEFAULT}", f"    scale = {DEFAULT}"),),
        loses=("test_sdpa_scale_argument",),
    ),
    Variant("treats scale=0 as not given", CELL, edits=(("if scale is None:", "if not scale:"),), loses=("test_sdpa_scale_argument",)),
    Variant(
        "takes the softmax over the queries",
        CELL,
        of=WRITTEN_OUT,
        edits=((SOFTMAX, SOFTMAX.replace("dim=-1", "dim=-2")),),
        loses=(
            "test_sdpa_softmax_over_keys",
            "test_sdpa_worked_example",
            "test_sdpa_matches_builtin",
            "test_sdpa_scale_by_sqrt_dk",
            "test_sdpa_scale_argument",
            "test_sdpa_batched",
            "test_sdpa_large_inputs",
            "test_sdpa_gradients",
        ),
    ),
    Variant(
        "uses K.T on batched tensors",
        CELL,
        of=WRITTEN_OUT,
        edits=(("K.transpose(-2, -1)", "K.T"),),
        loses=("test_sdpa_batched", "test_sdpa_matches_builtin"),
    ),
    Variant(
        "writes its own softmax without subtracting the max",
        CELL,
        of=WRITTEN_OUT,
        edits=((SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),),
        loses=("test_sdpa_large_inputs",),
    ),
    Variant(
        "calls F.scaled_dot_product_attention for the output",
        CELL,
        of=WRITTEN_OUT,
        edits=(("return weights @ V, weights", "return F.scaled_dot_product_attention(Q, K, V, scale=scale), weights"),),
        loses=("test_sdpa_no_builtin",),
    ),
    Variant(
        "calls the built-in attention through torch._C, where no tripwire on F can see it",
        CELL,
        of=WRITTEN_OUT,
        edits=(("return weights @ V, weights", "return torch._C._nn.scaled_dot_product_attention(Q, K, V, scale=scale), weights"),),
        loses=("test_sdpa_no_builtin",),
    ),
    Variant(
        "detaches the weights from the graph",
        CELL,
        of=WRITTEN_OUT,
        edits=((SOFTMAX, SOFTMAX + ".detach()"),),
        loses=("test_sdpa_gradients",),
    ),
    Variant(
        "scales the keys as well as the queries (the scale counted twice)",
        CELL,
        edits=((CALL, "return dot_product_attention(Q * scale, K * scale, V)"),),
        loses=(
            "test_sdpa_scale_by_sqrt_dk",
            "test_sdpa_scale_argument",
            "test_sdpa_worked_example",
            "test_sdpa_matches_builtin",
            "test_sdpa_softmax_over_keys",
            "test_sdpa_batched",
            "test_sdpa_gradients",
        ),
    ),
    # softmax_jacobian
    Variant(
        "softmax_jacobian forgets the diagonal term (only -a a^T)", JACOBIAN, edits=((JAC_RETURN, "return -outer"),), loses=ALL_JACOBIAN
    ),
    Variant(
        "softmax_jacobian keeps only the diagonal a_i (1 - a_i)",
        JACOBIAN,
        edits=((JAC_RETURN, "return torch.diag_embed(weights - weights ** 2)"),),
        loses=ALL_JACOBIAN,
    ),
    Variant(
        "softmax_jacobian has the sign flipped (a a^T - diag(a))",
        JACOBIAN,
        edits=((JAC_RETURN, "return outer - torch.diag_embed(weights)"),),
        loses=ALL_JACOBIAN,
    ),
    Variant(
        "softmax_jacobian with torch.diag, which is 1-D only",
        JACOBIAN,
        edits=((JAC_RETURN, "return torch.diag(weights) - outer"),),
        loses=("test_softmax_jacobian_batched",),
    ),
    Variant(
        "softmax_jacobian with torch.outer, which is 1-D only",
        JACOBIAN,
        edits=(("weights.unsqueeze(-1) * weights.unsqueeze(-2)", "torch.outer(weights, weights)"),),
        loses=("test_softmax_jacobian_batched",),
    ),
    # train_matching_attention
    Variant(
        "train_matching_attention ignores its lr argument (a fixed learning rate)",
        TRAIN,
        edits=(("optimizer = torch.optim.Adam([W_Q, W_K], lr=lr)", "optimizer = torch.optim.Adam([W_Q, W_K], lr=0.05)"),),
        loses=("test_matching_attention_learns",),
    ),
    Variant(
        "train_matching_attention sums the loss over the queries instead of averaging",
        TRAIN,
        edits=((LOSS, LOSS.replace(".mean()", ".sum()")),),
        loses=("test_matching_loss_is_cross_entropy",),
    ),
    Variant(
        "train_matching_attention forgets the 1/sqrt(d_k) scale",
        TRAIN,
        edits=((SCORES, SCORES.replace(" / math.sqrt(d_k)", "")),),
        loses=LEARNS,
    ),
    Variant(
        "train_matching_attention takes the softmax over the queries",
        TRAIN,
        edits=((LOG_WEIGHTS, LOG_WEIGHTS.replace("dim=-1", "dim=-2")),),
        loses=LEARNS,
    ),
    Variant(
        "train_matching_attention draws W_Q and W_K with unit variance (no 1/sqrt(d_model))",
        TRAIN,
        edits=((INIT, ").requires_grad_()"),),
        loses=("test_matching_init_variance",),
    ),
    Variant(
        "train_matching_attention draws W_Q and W_K with variance 1/d_k instead of 1/d_model",
        TRAIN,
        edits=((INIT, INIT.replace("d_model", "d_k")),),
        loses=("test_matching_init_variance",),
    ),
    Variant(
        "train_matching_attention divides by d_model, not sqrt(d_model) (variance 1/d_model^2)",
        TRAIN,
        edits=((INIT, " / d_model).requires_grad_()"),),
        loses=("test_matching_init_variance",),
    ),
    Variant(
        "train_matching_attention keeps nn.Linear's default init (variance 1/(3 d_model), not 1/d_model)",
        TRAIN,
        edits=(
            (
                (
                    "    d_model = queries.shape[-1]\n"
                    "    generator = torch.Generator().manual_seed(seed)\n"
                    "    W_Q = (torch.randn(d_model, d_k, generator=generator, dtype=queries.dtype) / math.sqrt(d_model)).requires_grad_()\n"
                    "    W_K = (torch.randn(d_model, d_k, generator=generator, dtype=queries.dtype) / math.sqrt(d_model)).requires_grad_()\n"
                    "    optimizer = torch.optim.Adam([W_Q, W_K], lr=lr)\n"
                ),
                (
                    "    torch.manual_seed(seed)\n"
                    "    project_q = torch.nn.Linear(queries.shape[-1], d_k, bias=False)\n"
                    "    project_k = torch.nn.Linear(keys.shape[-1], d_k, bias=False)\n"
                    "    optimizer = torch.optim.Adam(list(project_q.parameters()) + list(project_k.parameters()), lr=lr)\n"
                ),
            ),
            (
                (
                    "        scores = (queries @ W_Q) @ (keys @ W_K).transpose(-2, -1) / math.sqrt(d_k)  # [N, T_q, T_k]\n"
                    "        log_weights = torch.log_softmax(scores, dim=-1)  # over the keys; stable\n"
                    "        loss = -log_weights.gather(-1, target.unsqueeze(-1)).mean()  # mean over all queries\n"
                ),
                (
                    "        k = project_k(keys)\n"
                    "        _, weights = scaled_dot_product_attention(project_q(queries), k, k)\n"
                    "        loss = -torch.log(torch.gather(weights, 2, target[..., None])).mean()\n"
                    "        losses.append(float(loss))\n"
                ),
            ),
            (
                (
                    "        losses.append(loss.detach())\n"
                    "    return W_Q.detach(), W_K.detach(), torch.stack(losses) if losses else torch.zeros(0, dtype=queries.dtype)\n"
                ),
                "    return project_q.weight.T.detach(), project_k.weight.T.detach(), torch.tensor(losses)\n",
            ),
        ),
        loses=("test_matching_init_variance",),
    ),
    Variant(
        "train_matching_attention never calls optimizer.step()",
        TRAIN,
        edits=(("        optimizer.step()\n", ""),),
        loses=("test_matching_attention_learns",),
    ),
    # graded questions
    Variant(
        "Question 1: scales the variance by 1/sqrt(d_k) instead of 1/d_k",
        "answer_score_variance",
        edits=(
            (
                "    return [d_k * 1.0 * 1.0, d_k / d_k]  # d_k terms of variance 1; scaling by 1/sqrt(d_k) divides by d_k\n",
                "    return [d_k, math.sqrt(d_k)]\n",
            ),
        ),
        loses=("test_answer_score_variance",),
    ),
    Variant(
        "Question 1: gives the standard deviations",
        "answer_score_variance",
        edits=(
            (
                "    return [d_k * 1.0 * 1.0, d_k / d_k]  # d_k terms of variance 1; scaling by 1/sqrt(d_k) divides by d_k\n",
                "    return [math.sqrt(d_k), 1]\n",
            ),
        ),
        loses=("test_answer_score_variance",),
    ),
    Variant(
        "Question 2: thinks the largest |J| falls from x = 0 on (misses the peak at weight 1/2)",
        "answer_saturated_jacobian",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("peaks_fast", options)\n',
                '    return question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("falls_fast", options)\n',
            ),
        ),
        loses=("test_answer_saturated_jacobian",),
    ),
    Variant(
        "Question 2: thinks the largest |J| decays like 1/x, not exponentially",
        "answer_saturated_jacobian",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("peaks_fast", options)\n',
                '    return question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("peaks_slowly", options)\n',
            ),
        ),
        loses=("test_answer_saturated_jacobian",),
    ),
    Variant(
        "Question 3: picks the map scaled by 1/sqrt(d_k) (a favourite key, not one-hot)",
        "answer_unscaled_map",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("none", maps)\n',
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("1/sqrt(d_k)", maps)\n',
            ),
        ),
        loses=("test_answer_unscaled_map",),
    ),
    Variant(
        "Question 3: picks the nearly uniform map, scaled by 1/d_k",
        "answer_unscaled_map",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("none", maps)\n',
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("1/d_k", maps)\n',
            ),
        ),
        loses=("test_answer_unscaled_map",),
    ),
]

CORRECT_VARIANTS = [
    # Each round of correct variants takes the i-th variant of every cell (tests/conftest.py), so the
    # carried cell's i-th variant meets the i-th of scaled_dot_product_attention: both of these call it.
    Variant(
        "scaled_dot_product_attention scales the keys instead of the queries, then calls dot_product_attention",
        CELL,
        of="""
def scaled_dot_product_attention(Q, K, V, scale=None):
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    return dot_product_attention(Q, scale * K, V)
""",
    ),
    Variant(
        "the carried dot_product_attention left as the stub (notebook 02 grades it; PyTorch's stands in here)",
        CARRIED,
        of="""
def dot_product_attention(Q, K, V):
    # YOUR CODE HERE
    raise NotImplementedError()
""",
    ),
    Variant(
        "scaled_dot_product_attention divides the queries by sqrt(d_k), then calls dot_product_attention",
        CELL,
        of="""
def scaled_dot_product_attention(Q, K, V, scale=None):
    if scale is None:
        return dot_product_attention(Q / math.sqrt(Q.shape[-1]), K, V)
    return dot_product_attention(Q * scale, K, V)
""",
    ),
    Variant(
        "the carried dot_product_attention is wrong (softmax over the queries): it costs nothing here",
        CARRIED,
        of="""
def dot_product_attention(Q, K, V):
    weights = torch.softmax(Q @ K.transpose(-2, -1), dim=-2)
    return weights @ V, weights
""",
    ),
    Variant("scaled_dot_product_attention written out in full: matmul, scale, torch.softmax, @ V", CELL, of=WRITTEN_OUT),
    Variant(
        "scaled_dot_product_attention with einsum",
        CELL,
        of="""
def scaled_dot_product_attention(Q, K, V, scale=None):
    s = Q.shape[-1] ** -0.5 if scale is None else scale
    weights = torch.softmax(torch.einsum("...qd,...kd->...qk", Q, K) * s, dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights
""",
    ),
    Variant(
        "scaled_dot_product_attention with weights exp(s - logsumexp(s)), in float32",
        CELL,
        of="""
def scaled_dot_product_attention(Q, K, V, scale=None):
    scale = Q.shape[-1] ** -0.5 if scale is None else scale
    s = Q @ K.transpose(-2, -1) * scale
    weights = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return weights @ V, weights
""",
    ),
    Variant(
        "scaled_dot_product_attention query by query, in float64 inside",
        CELL,
        of="""
def scaled_dot_product_attention(Q, K, V, scale=None):
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    q, k, v = Q.double(), K.double(), V.double()
    outputs, weights = [], []
    for i in range(q.shape[-2]):
        s = (k @ q[..., i, :].unsqueeze(-1)).squeeze(-1) * scale        # [..., T_k]
        w = torch.exp(s - s.amax(dim=-1, keepdim=True))
        w = w / w.sum(dim=-1, keepdim=True)
        weights.append(w)
        outputs.append((w.unsqueeze(-2) @ v).squeeze(-2))               # [..., d_v]
    return torch.stack(outputs, dim=-2).to(Q.dtype), torch.stack(weights, dim=-2).to(Q.dtype)
""",
    ),
    Variant(
        "softmax_jacobian with einsum",
        JACOBIAN,
        of="""
def softmax_jacobian(weights):
    return torch.diag_embed(weights) - torch.einsum("...i,...j->...ij", weights, weights)
""",
    ),
    Variant(
        "softmax_jacobian as a_i (delta_ij - a_j), in float64 inside",
        JACOBIAN,
        of="""
def softmax_jacobian(weights):
    a = weights.double()
    eye = torch.eye(a.shape[-1], dtype=torch.float64)
    return (a.unsqueeze(-1) * (eye - a.unsqueeze(-2))).to(weights.dtype)
""",
    ),
    Variant(
        "softmax_jacobian entry by entry, row by row",
        JACOBIAN,
        of="""
def softmax_jacobian(weights):
    n = weights.shape[-1]
    rows = weights.reshape(-1, n)
    out = []
    for a in rows:
        J = torch.zeros(n, n, dtype=weights.dtype)
        for i in range(n):
            for j in range(n):
                J[i, j] = a[i] * ((1.0 if i == j else 0.0) - a[j])
        out.append(J)
    return torch.stack(out).reshape(*weights.shape, n)
""",
    ),
    Variant(
        "train_matching_attention with F.cross_entropy and einsum",
        TRAIN,
        of="""
def train_matching_attention(queries, keys, target, d_k, steps, lr=0.05, seed=0):
    d_model = queries.shape[-1]
    g = torch.Generator().manual_seed(seed)
    W_Q = torch.nn.Parameter(torch.randn(d_model, d_k, generator=g) * d_model ** -0.5)
    W_K = torch.nn.Parameter(torch.randn(d_model, d_k, generator=g) * d_model ** -0.5)
    optimizer = torch.optim.Adam([W_Q, W_K], lr=lr)
    losses = torch.zeros(steps)
    for step in range(steps):
        scores = torch.einsum("nqd,nkd->nqk", queries @ W_Q, keys @ W_K) * d_k ** -0.5
        loss = F.cross_entropy(scores.flatten(0, 1), target.flatten())
        losses[step] = loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return W_Q.detach().clone(), W_K.detach().clone(), losses
""",
    ),
    Variant(
        "train_matching_attention with nn.Linear (re-initialised, variance 1/d_model) and -log of scaled_dot_product_attention's weights",
        TRAIN,
        of="""
def train_matching_attention(queries, keys, target, d_k, steps, lr=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    project_q = torch.nn.Linear(queries.shape[-1], d_k, bias=False)
    project_k = torch.nn.Linear(keys.shape[-1], d_k, bias=False)
    for layer in (project_q, project_k):
        torch.nn.init.normal_(layer.weight, std=queries.shape[-1] ** -0.5, generator=g)
    optimizer = torch.optim.Adam(list(project_q.parameters()) + list(project_k.parameters()), lr=lr)
    losses = []
    for _ in range(steps):
        k = project_k(keys)
        _, weights = scaled_dot_product_attention(project_q(queries), k, k)
        loss = -torch.log(torch.gather(weights, 2, target[..., None])).mean()
        losses.append(float(loss))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return project_q.weight.T.detach(), project_k.weight.T.detach(), torch.tensor(losses)
""",
    ),
    Variant(
        "train_matching_attention with uniform initial entries of variance 1/d_model",
        TRAIN,
        of="""
def train_matching_attention(queries, keys, target, d_k, steps, lr=0.05, seed=0):
    d_model = queries.shape[-1]
    g = torch.Generator().manual_seed(seed)
    bound = math.sqrt(3 / d_model)  # uniform on [-b, b] has variance b^2 / 3
    W_Q = ((2 * torch.rand(d_model, d_k, generator=g) - 1) * bound).requires_grad_()
    W_K = ((2 * torch.rand(d_model, d_k, generator=g) - 1) * bound).requires_grad_()
    optimizer = torch.optim.Adam([W_Q, W_K], lr=lr)
    losses = []
    for _ in range(steps):
        log_weights = torch.log_softmax((queries @ W_Q) @ (keys @ W_K).mT / math.sqrt(d_k), dim=-1)
        loss = -log_weights.gather(-1, target.unsqueeze(-1)).mean()
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return W_Q.detach(), W_K.detach(), torch.tensor(losses)
""",
    ),
    Variant(
        "questions answered as other numbers and letters",
        "answer_score_variance",
        edits=(
            (
                "    return [d_k * 1.0 * 1.0, d_k / d_k]  # d_k terms of variance 1; scaling by 1/sqrt(d_k) divides by d_k\n",
                "    return torch.tensor([2.0 ** math.log2(d_k), d_k / d_k])\n",
            ),
        ),
    ),
    Variant(
        "Question 2 in capitals",
        "answer_saturated_jacobian",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("peaks_fast", options)\n',
                '    return " " + question_values("03_scaled_dot_product_attention", "saturated_jacobian").letter_of("peaks_fast", options).upper()\n',
            ),
        ),
    ),
    Variant(
        "Question 3 in capitals, with spaces",
        "answer_unscaled_map",
        edits=(
            (
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("none", maps)\n',
                '    return question_values("03_scaled_dot_product_attention", "unscaled_map").letter_of("none", maps).upper() + " "\n',
            ),
        ),
    ),
]
