"""The query mixture's per-query class sums (``model="query-mixture"``), laid out for speed (``docs/bayes_speed.md``).

A query's log-likelihood given its class ``k`` is a sum over its prompts (*patterns*: a design row and its
counts) of a sum over the positions chosen of one cell of a grid ``H[row, position, count - 1, k]``
(see ``_ModelSpec._mixture_setup``); the query mixes the classes with a log-sum-exp. Measured on the study,
the cost of the first layout (two padded two-dimensional gathers, each followed by a sum) was not the
scatter-adds of the gathers' gradients but (a) XLA's fusion of a gather with a sum over a short axis and
(b) PyTensor's rewrite of ``log(exp(x) + 1)`` into a softplus, which JAX evaluates branch by branch. Here:

* the sums as one one-dimensional gather per *slot* (the j-th entry of every pattern, the j-th pattern of
  every query), patterns and queries sorted by their number of entries (descending) so that slot j is a
  prefix and no padding is gathered (:func:`mixture_tables`, :func:`query_class_terms`);
* the whole class sum as one JAX function, wrapped in a PyTensor Op (:func:`mixture_query_op`), for NumPyro,
  which differentiates the JAX form; PyMC's own samplers and nutpie use the PyTensor graph.

The log-density is that of the first layout, term by term (only the order of additions differs).
"""

from __future__ import annotations

import numpy as np

#: the layout of the query sums in the PyTensor graph: "slots" (this module) or "gather" (the first version)
LAYOUT = "slots"
#: ``exp(log kappa + log p)`` as "prod" (``exp(lk) * exp(logp)``: no softplus rewrite) or "exp" (the first version)
EX = "prod"


def _prefix_slots(table, pad):
    """Sort the rows of a padded index table by their number of real entries (descending).

    Returns ``(order, slots)``: row ``order[i]`` of ``table`` becomes row i, and ``slots[j]`` holds the j-th
    entry of the first ``len(slots[j])`` sorted rows (the rows that have one); padding is never listed.
    Within a row the real entries are moved to the front first (their order does not matter: they are summed).
    """
    real = table != pad
    front = np.argsort(~real, axis=1, kind="stable")
    packed = np.take_along_axis(table, front, 1)
    count = real.sum(1)
    order = np.argsort(-count, kind="stable")
    packed, count = packed[order], count[order]
    slots = [packed[:int((count > j).sum()), j].astype(np.int64) for j in range(table.shape[1])]
    return order, [s for s in slots if len(s)]


def mixture_tables(entries, pad_h, qpat, n_pat, qcell, qweight):
    """The slot layout of the two gathers.

    Parameters
    ----------
    entries : ndarray of int, (patterns, max entries)
        Flat grid index of each pattern's terms; ``pad_h`` marks no entry.
    pad_h : int
        The padding index of ``entries``.
    qpat : ndarray of int, (query signatures, max prompts)
        Pattern index of each query signature's prompts; ``n_pat`` marks no prompt.
    n_pat : int
        The number of patterns (the padding index of ``qpat``).
    qcell, qweight : ndarray, (query signatures,)
        Each signature's cell and multiplicity.

    Returns
    -------
    dict
        ``ent_slots`` (list of grid-index arrays, one per slot, each a prefix of the sorted patterns),
        ``q_slots`` (list of sorted-pattern-index arrays, one per slot, each a prefix of the sorted
        signatures), and the signatures' ``qcell`` and ``qweight`` in the sorted order.
    """
    p_order, ent_slots = _prefix_slots(np.asarray(entries), pad_h)
    rank = np.empty(len(p_order) + 1, dtype=np.int64)
    rank[p_order] = np.arange(len(p_order))
    rank[-1] = n_pat                                                             # padding stays padding
    q_local = rank[np.asarray(qpat)]
    q_order, q_slots = _prefix_slots(q_local, n_pat)
    return {"ent_slots": ent_slots, "q_slots": q_slots, "qcell": np.asarray(qcell)[q_order],
            "qweight": np.asarray(qweight, dtype=float)[q_order], "n_pat": len(p_order), "n_sig": len(q_order)}


def _slot_sum(pm, pt, x, slots, name, n_out):
    """``out[i] = sum_j x[slots[j][i]]`` over the slots that reach row i; rows no slot reaches (a prompt
    without a valid choice) are zero."""
    out = x[pm.Data(f"{name}0", slots[0])]
    for j, s in enumerate(slots[1:], start=1):
        out = pt.inc_subtensor(out[:len(s)], x[pm.Data(f"{name}{j}", s)])
    if len(slots[0]) < n_out:
        out = pt.concatenate([out, pt.zeros((n_out - len(slots[0]), x.shape[1]))], axis=0)
    return out


def query_class_terms(pm, pt, H, tables):
    """(signatures, classes) sums of the grid ``H`` (flat grid index x classes) over each query's terms."""
    ll_pat = _slot_sum(pm, pt, H, tables["ent_slots"], "mix_ent_slot", tables["n_pat"])
    return _slot_sum(pm, pt, ll_pat, tables["q_slots"], "mix_q_slot", tables["n_sig"])


def _grid_np(logits, lam_row, lk, onehot, n_runs):
    """The flat grid ``H`` (rows * positions * runs, classes) in numpy, as the model computes it."""
    lg = logits[:, :, None] + lam_row[:, None, None] * onehot
    m = lg.max(1, keepdims=True)
    x = lk[:, None, None] + lg - (m + np.log(np.exp(lg - m).sum(1, keepdims=True)))
    ex = np.exp(x)
    cum = [x]
    for i in range(1, n_runs):
        cum.append(cum[-1] + np.log(ex + i))
    return np.stack(cum, axis=2).reshape((-1, onehot.shape[2]))


def kernel_np(tables, onehot, n_runs, logits, lam_row, lk, lw):
    """``sum_q w_q logsumexp_k(L[q, k] + lw[cell_q, k])`` in numpy (the value of :class:`MixtureQueryOp`)."""
    L = _slot_sum_np(_slot_sum_np(_grid_np(logits, lam_row, lk, onehot, n_runs), tables["ent_slots"],
                                  tables["n_pat"]), tables["q_slots"], tables["n_sig"])
    z = L + lw[tables["qcell"]]
    m = z.max(1, keepdims=True)
    return float((tables["qweight"] * (m[:, 0] + np.log(np.exp(z - m).sum(1)))).sum())


def _slot_sum_np(x, slots, n_out):
    out = np.zeros((n_out, x.shape[1]))
    for s in slots:
        out[:len(s)] += x[s]
    return out


def jax_kernel(tables, onehot, n_runs):
    """The same sum as a JAX function ``(logits, lam_row, lk, lw) -> scalar`` (what NumPyro differentiates)."""
    import jax
    import jax.numpy as jnp

    es = [jnp.asarray(s) for s in tables["ent_slots"]]
    qs = [jnp.asarray(s) for s in tables["q_slots"]]
    qcell, qweight, oh = jnp.asarray(tables["qcell"]), jnp.asarray(tables["qweight"]), jnp.asarray(onehot)

    def slot_sum(x, slots, n_out):
        out = x[slots[0]]
        for s in slots[1:]:
            out = out.at[:s.shape[0]].add(x[s])
        if slots[0].shape[0] < n_out:
            out = jnp.concatenate([out, jnp.zeros((n_out - slots[0].shape[0], x.shape[1]))], axis=0)
        return out

    def lse(z, axis):
        m = jax.lax.stop_gradient(z.max(axis, keepdims=True))
        return m + jnp.log(jnp.exp(z - m).sum(axis, keepdims=True))

    def f(logits, lam_row, lk, lw):
        lg = logits[:, :, None] + lam_row[:, None, None] * oh
        x = lk[:, None, None] + lg - lse(lg, 1)
        ex = jnp.exp(x)
        cum = [x]
        for i in range(1, n_runs):
            cum.append(cum[-1] + jnp.log(ex + i))
        H = jnp.stack(cum, axis=2).reshape((-1, oh.shape[2]))
        L = slot_sum(slot_sum(H, es, tables["n_pat"]), qs, tables["n_sig"])
        return (qweight * lse(L + lw[qcell], 1)[:, 0]).sum()

    return f



_OP_CLASS: list = []


def _op_class():
    """The PyTensor Op class (defined on first use, so that importing this module does not import PyTensor)."""
    if _OP_CLASS:
        return _OP_CLASS[0]
    import pytensor.tensor as pt
    from pytensor.graph.basic import Apply
    from pytensor.graph.op import Op

    class MixtureQueryOp(Op):
        """``sum_q w_q logsumexp_k(L[q, k] + lw[cell_q, k])`` of ``(logits, lam_row, lk, lw)`` as one Op.

        Its JAX form is :func:`jax_kernel` (NumPyro differentiates it with JAX); ``perform`` is
        :func:`kernel_np`. Its PyTensor gradient is :class:`MixtureQueryGradOp` (JAX's gradient, needed
        by PyMC to accept the model for NUTS; NumPyro does not use it), so it is used only with NumPyro.
        """

        __props__ = ("key",)

        def __init__(self, key, tables, onehot, n_runs):
            self.key = key
            self.tables, self.onehot, self.n_runs = tables, onehot, n_runs

        def make_node(self, *inputs):
            inputs = [pt.as_tensor_variable(x) for x in inputs]
            return Apply(self, inputs, [pt.dscalar()])

        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = np.asarray(kernel_np(self.tables, self.onehot, self.n_runs, *inputs))

        def grad(self, inputs, output_grads):
            grads = MixtureQueryGradOp(self)(*inputs)
            return [output_grads[0] * g for g in grads]

    class MixtureQueryGradOp(Op):
        """The gradient of a :class:`MixtureQueryOp` with respect to its four inputs (JAX)."""

        __props__ = ("key",)

        def __init__(self, forward):
            self.key = forward.key
            self.forward = forward
            self._fn = None

        def make_node(self, *inputs):
            inputs = [pt.as_tensor_variable(x) for x in inputs]
            return Apply(self, inputs, [x.type() for x in inputs])

        def jax_fn(self):
            import jax

            f = self.forward
            return jax.grad(jax_kernel(f.tables, f.onehot, f.n_runs), argnums=(0, 1, 2, 3))

        def perform(self, node, inputs, output_storage):
            import jax

            if self._fn is None:
                self._fn = jax.jit(self.jax_fn())
            for store, g in zip(output_storage, self._fn(*inputs)):
                store[0] = np.asarray(g, dtype=float)

    try:
        from pytensor.link.jax.dispatch import jax_funcify

        @jax_funcify.register(MixtureQueryOp)
        def _jax_mixture(op, **kwargs):
            return jax_kernel(op.tables, op.onehot, op.n_runs)

        @jax_funcify.register(MixtureQueryGradOp)
        def _jax_mixture_grad(op, **kwargs):
            return op.jax_fn()
    except ImportError:                                                    # no JAX: perform only
        pass
    _OP_CLASS.append(MixtureQueryOp)
    return MixtureQueryOp


def mixture_query_op(tables, onehot, n_runs):
    """A :class:`MixtureQueryOp` for these tables (one per model; compared by identity)."""
    return _op_class()(f"mixture-{id(tables)}", tables, onehot, n_runs)
