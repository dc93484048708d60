"""Per-sequence math of the connectionist temporal classification loss (``ctc_loss``), written
once for both kernel halves: ``kernels/cpu/ctc.py`` compiles it with ``njit``, and
``kernels/cuda/ctc.py`` with ``cuda.jit(device=True)`` (one thread per sequence), both through
``kernels/math_build.py``. Left undecorated here for that reason; it allocates nothing.

The label sequence l (length L, blanks excluded) is extended with blanks, l' = (blank, l_1,
blank, l_2, ..., l_L, blank) of length S = 2 L + 1. In log space, alpha[t, s] is the
probability of emitting the first t + 1 frames and ending in state s (its own emission
included), beta[t, s] that of emitting frames t + 1 .. T - 1 after being in state s at frame t
(excluded), so that sum_s alpha[t, s] beta[t, s] = p(l | x) at every frame t.
"""
import math


def ctc_sequence(x, label, label_len, seq_len, blank, logp, alpha, beta, grad, head,
                 want_grad):
    """The loss -log p(label | x) of one sequence, x (frames, alphabet) holding unnormalised
    activations of which the first ``seq_len`` frames count, the label its first ``label_len``
    entries. With ``want_grad``, ``grad`` (frames, alphabet) receives ``head`` times the
    gradient of the loss with respect to x (0 on frames beyond seq_len). ``logp`` (frames,
    alphabet), ``alpha``, ``beta`` (frames, >= 2 label_len + 1) are float64 scratch. A label
    that no alignment can produce gives an infinite loss and a zero gradient."""
    alphabet = x.shape[1]
    frames = seq_len
    states = 2 * label_len + 1
    neg_inf = -math.inf
    if want_grad:
        for t in range(x.shape[0]):
            for c in range(alphabet):
                grad[t, c] = 0.0
    if frames <= 0:                              # nothing emitted: only the empty label fits
        return 0.0 if label_len == 0 else math.inf
    for t in range(frames):                      # log-softmax of every frame
        top = x[t, 0]
        for c in range(1, alphabet):
            if x[t, c] > top:
                top = x[t, c]
        total = 0.0
        for c in range(alphabet):
            total += math.exp(x[t, c] - top)
        shift = top + math.log(total)
        for c in range(alphabet):
            logp[t, c] = x[t, c] - shift
    # forward variables
    for s in range(states):
        alpha[0, s] = neg_inf
    alpha[0, 0] = logp[0, blank]
    if states > 1:
        alpha[0, 1] = logp[0, int(label[0])]
    for t in range(1, frames):
        for s in range(states):
            sym = blank if s % 2 == 0 else int(label[(s - 1) // 2])
            a0 = alpha[t - 1, s]
            a1 = alpha[t - 1, s - 1] if s >= 1 else neg_inf
            a2 = neg_inf
            if s >= 2 and sym != blank and sym != int(label[(s - 3) // 2]):
                a2 = alpha[t - 1, s - 2]
            top = max(a0, max(a1, a2))
            if top == neg_inf:
                alpha[t, s] = neg_inf
            else:
                alpha[t, s] = (top + math.log(math.exp(a0 - top) + math.exp(a1 - top)
                                              + math.exp(a2 - top)) + logp[t, sym])
    last = alpha[frames - 1, states - 1]
    prev = alpha[frames - 1, states - 2] if states > 1 else neg_inf
    top = max(last, prev)
    if top == neg_inf:
        log_likelihood = neg_inf
    else:
        log_likelihood = top + math.log(math.exp(last - top) + math.exp(prev - top))
    if not want_grad:
        return -log_likelihood
    if log_likelihood == neg_inf:
        return math.inf
    # backward variables
    for s in range(states):
        beta[frames - 1, s] = 0.0 if s >= states - 2 else neg_inf
    for step in range(1, frames):
        t = frames - 1 - step
        for s in range(states):
            sym = blank if s % 2 == 0 else int(label[(s - 1) // 2])
            b0 = beta[t + 1, s] + logp[t + 1, sym]
            b1 = neg_inf
            if s + 1 < states:
                sym1 = blank if (s + 1) % 2 == 0 else int(label[s // 2])
                b1 = beta[t + 1, s + 1] + logp[t + 1, sym1]
            b2 = neg_inf
            if s + 2 < states and s % 2 == 1:
                sym2 = int(label[(s + 1) // 2])
                if sym2 != sym:
                    b2 = beta[t + 1, s + 2] + logp[t + 1, sym2]
            top = max(b0, max(b1, b2))
            if top == neg_inf:
                beta[t, s] = neg_inf
            else:
                beta[t, s] = top + math.log(math.exp(b0 - top) + math.exp(b1 - top)
                                            + math.exp(b2 - top))
    # d loss / d x[t, c] = softmax[t, c] - sum over states s of symbol c of
    # exp(alpha[t, s] + beta[t, s] - log p); grad holds the sums first
    for t in range(frames):
        for s in range(states):
            sym = blank if s % 2 == 0 else int(label[(s - 1) // 2])
            v = alpha[t, s] + beta[t, s]
            if v != neg_inf:
                grad[t, sym] += math.exp(v - log_likelihood)
        for c in range(alphabet):
            grad[t, c] = head * (math.exp(logp[t, c]) - grad[t, c])
    return -log_likelihood


def label_length(label, padding):
    """The entries of a padded label before the first ``padding`` value."""
    n = 0
    for i in range(label.shape[0]):
        if int(label[i]) == padding:
            break
        n += 1
    return n


def ctc_batch_sequence(b, data, label, data_lengths, label_lengths, use_data_lengths,
                       use_label_lengths, blank, padding, loss, grad, head, logp, alpha, beta,
                       want_grad):
    """loss[b] (and with want_grad grad[:, b, :]) of sequence b of the batch, the arguments being
    those of the ``ctc_loss`` launchers: data (frames, batch, alphabet); a sequence's frames
    are data_lengths[b] with use_data_lengths (else all), its label length label_lengths[b]
    with use_label_lengths (else up to the first ``padding``)."""
    frames = int(data_lengths[b]) if use_data_lengths else data.shape[0]
    length = int(label_lengths[b]) if use_label_lengths else label_length(label[b], padding)
    loss[b] = ctc_sequence(data[:, b, :], label[b], length, frames, blank, logp[b], alpha[b],
                           beta[b], grad[:, b, :], head[b], want_grad)
