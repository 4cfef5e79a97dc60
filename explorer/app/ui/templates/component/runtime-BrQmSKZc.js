const sn = 2, y = /* @__PURE__ */ Symbol(), fn = "http://www.w3.org/1999/xhtml", me = !1;
var pt = Array.isArray, wt = Array.prototype.indexOf, ln = Array.from, un = Object.defineProperty, se = Object.getOwnPropertyDescriptor, an = Object.getOwnPropertyDescriptors, yt = Object.prototype, gt = Array.prototype, Et = Object.getPrototypeOf, je = Object.isExtensible;
const on = () => {
};
function mt(e) {
  for (var t = 0; t < e.length; t++)
    e[t]();
}
function Ke() {
  var e, t, n = new Promise((s, r) => {
    e = s, t = r;
  });
  return { promise: n, resolve: e, reject: t };
}
const g = 2, ve = 4, ye = 8, Be = 1 << 24, P = 16, Y = 32, Z = 64, Ve = 128, k = 512, E = 1024, T = 2048, K = 4096, j = 8192, I = 16384, Re = 32768, be = 65536, Ie = 1 << 17, ze = 1 << 18, le = 1 << 19, bt = 1 << 20, H = 32768, xe = 1 << 21, Se = 1 << 22, q = 1 << 23, Ee = /* @__PURE__ */ Symbol("$state"), J = new class extends Error {
  name = "StaleReactionError";
  message = "The reaction that called `getAbortSignal()` was re-run or destroyed";
}();
function xt() {
  throw new Error("https://svelte.dev/e/async_derived_orphan");
}
function Tt(e) {
  throw new Error("https://svelte.dev/e/effect_in_teardown");
}
function At() {
  throw new Error("https://svelte.dev/e/effect_in_unowned_derived");
}
function kt(e) {
  throw new Error("https://svelte.dev/e/effect_orphan");
}
function Rt() {
  throw new Error("https://svelte.dev/e/effect_update_depth_exceeded");
}
function St() {
  throw new Error("https://svelte.dev/e/state_descriptors_fixed");
}
function Ft() {
  throw new Error("https://svelte.dev/e/state_prototype_fixed");
}
function Ot() {
  throw new Error("https://svelte.dev/e/state_unsafe_mutation");
}
function vn() {
  throw new Error("https://svelte.dev/e/svelte_boundary_reset_onerror");
}
function Ge(e) {
  return e === this.v;
}
let Nt = !1, O = null;
function _e(e) {
  O = e;
}
function _n(e, t = !1, n) {
  O = {
    p: O,
    i: !1,
    c: null,
    e: null,
    s: e,
    x: null,
    l: null
  };
}
function dn(e) {
  var t = (
    /** @type {ComponentContext} */
    O
  ), n = t.e;
  if (n !== null) {
    t.e = null;
    for (var s of n)
      ft(s);
  }
  return t.i = !0, O = t.p, /** @type {T} */
  {};
}
function He() {
  return !0;
}
let Q = [];
function Ct() {
  var e = Q;
  Q = [], mt(e);
}
function $e(e) {
  if (Q.length === 0) {
    var t = Q;
    queueMicrotask(() => {
      t === Q && Ct();
    });
  }
  Q.push(e);
}
function Pt(e) {
  var t = h;
  if (t === null)
    return v.f |= q, e;
  if ((t.f & Re) === 0) {
    if ((t.f & Ve) === 0)
      throw e;
    t.b.error(e);
  } else
    de(e, t);
}
function de(e, t) {
  for (; t !== null; ) {
    if ((t.f & Ve) !== 0)
      try {
        t.b.error(e);
        return;
      } catch (n) {
        e = n;
      }
    t = t.parent;
  }
  throw e;
}
const Dt = -7169;
function m(e, t) {
  e.f = e.f & Dt | t;
}
function Fe(e) {
  (e.f & k) !== 0 || e.deps === null ? m(e, E) : m(e, K);
}
function We(e) {
  if (e !== null)
    for (const t of e)
      (t.f & g) === 0 || (t.f & H) === 0 || (t.f ^= H, We(
        /** @type {Derived} */
        t.deps
      ));
}
function Mt(e, t, n) {
  (e.f & T) !== 0 ? t.add(e) : (e.f & K) !== 0 && n.add(e), We(e.deps), m(e, E);
}
const ce = /* @__PURE__ */ new Set();
let p = null, R = null, F = [], Oe = null, Te = !1;
class ee {
  committed = !1;
  /**
   * The current values of any sources that are updated in this batch
   * They keys of this map are identical to `this.#previous`
   * @type {Map<Source, any>}
   */
  current = /* @__PURE__ */ new Map();
  /**
   * The values of any sources that are updated in this batch _before_ those updates took place.
   * They keys of this map are identical to `this.#current`
   * @type {Map<Source, any>}
   */
  previous = /* @__PURE__ */ new Map();
  /**
   * When the batch is committed (and the DOM is updated), we need to remove old branches
   * and append new ones by calling the functions added inside (if/each/key/etc) blocks
   * @type {Set<() => void>}
   */
  #n = /* @__PURE__ */ new Set();
  /**
   * If a fork is discarded, we need to destroy any effects that are no longer needed
   * @type {Set<(batch: Batch) => void>}
   */
  #r = /* @__PURE__ */ new Set();
  /**
   * The number of async effects that are currently in flight
   */
  #e = 0;
  /**
   * The number of async effects that are currently in flight, _not_ inside a pending boundary
   */
  #t = 0;
  /**
   * A deferred that resolves when the batch is committed, used with `settled()`
   * TODO replace with Promise.withResolvers once supported widely enough
   * @type {{ promise: Promise<void>, resolve: (value?: any) => void, reject: (reason: unknown) => void } | null}
   */
  #i = null;
  /**
   * Deferred effects (which run after async work has completed) that are DIRTY
   * @type {Set<Effect>}
   */
  #s = /* @__PURE__ */ new Set();
  /**
   * Deferred effects that are MAYBE_DIRTY
   * @type {Set<Effect>}
   */
  #f = /* @__PURE__ */ new Set();
  /**
   * A set of branches that still exist, but will be destroyed when this batch
   * is committed — we skip over these during `process`
   * @type {Set<Effect>}
   */
  skipped_effects = /* @__PURE__ */ new Set();
  is_fork = !1;
  is_deferred() {
    return this.is_fork || this.#t > 0;
  }
  /**
   *
   * @param {Effect[]} root_effects
   */
  process(t) {
    F = [], this.apply();
    var n = [], s = [];
    for (const r of t)
      this.#l(r, n, s);
    this.is_fork || this.#a(), this.is_deferred() ? (this.#u(s), this.#u(n)) : (p = null, qe(s), qe(n), this.#i?.resolve()), R = null;
  }
  /**
   * Traverse the effect tree, executing effects or stashing
   * them for later execution as appropriate
   * @param {Effect} root
   * @param {Effect[]} effects
   * @param {Effect[]} render_effects
   */
  #l(t, n, s) {
    t.f ^= E;
    for (var r = t.first, f = null; r !== null; ) {
      var l = r.f, u = (l & (Y | Z)) !== 0, i = u && (l & E) !== 0, a = i || (l & j) !== 0 || this.skipped_effects.has(r);
      if (!a && r.fn !== null) {
        u ? r.f ^= E : f !== null && (l & (ve | ye | Be)) !== 0 ? f.b.defer_effect(r) : (l & ve) !== 0 ? n.push(r) : ue(r) && ((l & P) !== 0 && this.#s.add(r), ie(r));
        var o = r.first;
        if (o !== null) {
          r = o;
          continue;
        }
      }
      var c = r.parent;
      for (r = r.next; r === null && c !== null; )
        c === f && (f = null), r = c.next, c = c.parent;
    }
  }
  /**
   * @param {Effect[]} effects
   */
  #u(t) {
    for (var n = 0; n < t.length; n += 1)
      Mt(t[n], this.#s, this.#f);
  }
  /**
   * Associate a change to a given source with the current
   * batch, noting its previous and current values
   * @param {Source} source
   * @param {any} value
   */
  capture(t, n) {
    n !== y && !this.previous.has(t) && this.previous.set(t, n), (t.f & q) === 0 && (this.current.set(t, t.v), R?.set(t, t.v));
  }
  activate() {
    p = this, this.apply();
  }
  deactivate() {
    p === this && (p = null, R = null);
  }
  flush() {
    if (this.activate(), F.length > 0) {
      if (jt(), p !== null && p !== this)
        return;
    } else this.#e === 0 && this.process([]);
    this.deactivate();
  }
  discard() {
    for (const t of this.#r) t(this);
    this.#r.clear();
  }
  #a() {
    if (this.#t === 0) {
      for (const t of this.#n) t();
      this.#n.clear();
    }
    this.#e === 0 && this.#o();
  }
  #o() {
    if (ce.size > 1) {
      this.previous.clear();
      var t = R, n = !0;
      for (const r of ce) {
        if (r === this) {
          n = !1;
          continue;
        }
        const f = [];
        for (const [u, i] of this.current) {
          if (r.current.has(u))
            if (n && i !== r.current.get(u))
              r.current.set(u, i);
            else
              continue;
          f.push(u);
        }
        if (f.length === 0)
          continue;
        const l = [...r.current.keys()].filter((u) => !this.current.has(u));
        if (l.length > 0) {
          var s = F;
          F = [];
          const u = /* @__PURE__ */ new Set(), i = /* @__PURE__ */ new Map();
          for (const a of f)
            Ze(a, l, u, i);
          if (F.length > 0) {
            p = r, r.apply();
            for (const a of F)
              r.#l(a, [], []);
            r.deactivate();
          }
          F = s;
        }
      }
      p = null, R = t;
    }
    this.committed = !0, ce.delete(this);
  }
  /**
   *
   * @param {boolean} blocking
   */
  increment(t) {
    this.#e += 1, t && (this.#t += 1);
  }
  /**
   *
   * @param {boolean} blocking
   */
  decrement(t) {
    this.#e -= 1, t && (this.#t -= 1), this.revive();
  }
  revive() {
    for (const t of this.#s)
      this.#f.delete(t), m(t, T), te(t);
    for (const t of this.#f)
      m(t, K), te(t);
    this.flush();
  }
  /** @param {() => void} fn */
  oncommit(t) {
    this.#n.add(t);
  }
  /** @param {(batch: Batch) => void} fn */
  ondiscard(t) {
    this.#r.add(t);
  }
  settled() {
    return (this.#i ??= Ke()).promise;
  }
  static ensure() {
    if (p === null) {
      const t = p = new ee();
      ce.add(p), ee.enqueue(() => {
        p === t && t.flush();
      });
    }
    return p;
  }
  /** @param {() => void} task */
  static enqueue(t) {
    $e(t);
  }
  apply() {
  }
}
function jt() {
  var e = z;
  Te = !0;
  var t = null;
  try {
    var n = 0;
    for (pe(!0); F.length > 0; ) {
      var s = ee.ensure();
      if (n++ > 1e3) {
        var r, f;
        It();
      }
      s.process(F), L.clear();
    }
  } finally {
    Te = !1, pe(e), Oe = null;
  }
}
function It() {
  try {
    Rt();
  } catch (e) {
    de(e, Oe);
  }
}
let N = null;
function qe(e) {
  var t = e.length;
  if (t !== 0) {
    for (var n = 0; n < t; ) {
      var s = e[n++];
      if ((s.f & (I | j)) === 0 && ue(s) && (N = /* @__PURE__ */ new Set(), ie(s), s.deps === null && s.first === null && s.nodes === null && (s.teardown === null && s.ac === null ? ut(s) : s.fn = null), N?.size > 0)) {
        L.clear();
        for (const r of N) {
          if ((r.f & (I | j)) !== 0) continue;
          const f = [r];
          let l = r.parent;
          for (; l !== null; )
            N.has(l) && (N.delete(l), f.push(l)), l = l.parent;
          for (let u = f.length - 1; u >= 0; u--) {
            const i = f[u];
            (i.f & (I | j)) === 0 && ie(i);
          }
        }
        N.clear();
      }
    }
    N = null;
  }
}
function Ze(e, t, n, s) {
  if (!n.has(e) && (n.add(e), e.reactions !== null))
    for (const r of e.reactions) {
      const f = r.f;
      (f & g) !== 0 ? Ze(
        /** @type {Derived} */
        r,
        t,
        n,
        s
      ) : (f & (Se | P)) !== 0 && (f & T) === 0 && Je(r, t, s) && (m(r, T), te(
        /** @type {Effect} */
        r
      ));
    }
}
function Je(e, t, n) {
  const s = n.get(e);
  if (s !== void 0) return s;
  if (e.deps !== null)
    for (const r of e.deps) {
      if (t.includes(r))
        return !0;
      if ((r.f & g) !== 0 && Je(
        /** @type {Derived} */
        r,
        t,
        n
      ))
        return n.set(
          /** @type {Derived} */
          r,
          !0
        ), !0;
    }
  return n.set(e, !1), !1;
}
function te(e) {
  for (var t = Oe = e; t.parent !== null; ) {
    t = t.parent;
    var n = t.f;
    if (Te && t === h && (n & P) !== 0 && (n & ze) === 0)
      return;
    if ((n & (Z | Y)) !== 0) {
      if ((n & E) === 0) return;
      t.f ^= E;
    }
  }
  F.push(t);
}
function hn(e) {
  let t = 0, n = Ce(0), s;
  return () => {
    De() && (X(n), Zt(() => (t === 0 && (s = rn(() => e(() => fe(n)))), t += 1, () => {
      $e(() => {
        t -= 1, t === 0 && (s?.(), s = void 0, fe(n));
      });
    })));
  };
}
function qt(e, t, n, s) {
  const r = Ut;
  if (n.length === 0 && e.length === 0) {
    s(t.map(r));
    return;
  }
  var f = p, l = (
    /** @type {Effect} */
    h
  ), u = Lt();
  function i() {
    Promise.all(n.map((a) => /* @__PURE__ */ Yt(a))).then((a) => {
      u();
      try {
        s([...t.map(r), ...a]);
      } catch (o) {
        (l.f & I) === 0 && de(o, l);
      }
      f?.deactivate(), he();
    }).catch((a) => {
      de(a, l);
    });
  }
  e.length > 0 ? Promise.all(e).then(() => {
    u();
    try {
      return i();
    } finally {
      f?.deactivate(), he();
    }
  }) : i();
}
function Lt() {
  var e = h, t = v, n = O, s = p;
  return function(f = !0) {
    ne(e), U(t), _e(n), f && s?.activate();
  };
}
function he() {
  ne(null), U(null), _e(null);
}
// @__NO_SIDE_EFFECTS__
function Ut(e) {
  var t = g | T, n = v !== null && (v.f & g) !== 0 ? (
    /** @type {Derived} */
    v
  ) : null;
  return h !== null && (h.f |= le), {
    ctx: O,
    deps: null,
    effects: null,
    equals: Ge,
    f: t,
    fn: e,
    reactions: null,
    rv: 0,
    v: (
      /** @type {V} */
      y
    ),
    wv: 0,
    parent: n ?? h,
    ac: null
  };
}
// @__NO_SIDE_EFFECTS__
function Yt(e, t, n) {
  let s = (
    /** @type {Effect | null} */
    h
  );
  s === null && xt();
  var r = (
    /** @type {Boundary} */
    s.b
  ), f = (
    /** @type {Promise<V>} */
    /** @type {unknown} */
    void 0
  ), l = Ce(
    /** @type {V} */
    y
  ), u = !v, i = /* @__PURE__ */ new Map();
  return Wt(() => {
    var a = Ke();
    f = a.promise;
    try {
      Promise.resolve(e()).then(a.resolve, a.reject).then(() => {
        o === p && o.committed && o.deactivate(), he();
      });
    } catch (d) {
      a.reject(d), he();
    }
    var o = (
      /** @type {Batch} */
      p
    );
    if (u) {
      var c = r.is_rendered();
      r.update_pending_count(1), o.increment(c), i.get(o)?.reject(J), i.delete(o), i.set(o, a);
    }
    const _ = (d, w = void 0) => {
      if (o.activate(), w)
        w !== J && (l.f |= q, ke(l, w));
      else {
        (l.f & q) !== 0 && (l.f ^= q), ke(l, d);
        for (const [ae, oe] of i) {
          if (i.delete(ae), ae === o) break;
          oe.reject(J);
        }
      }
      u && (r.update_pending_count(-1), o.decrement(c));
    };
    a.promise.then(_, (d) => _(null, d || "unknown"));
  }), $t(() => {
    for (const a of i.values())
      a.reject(J);
  }), new Promise((a) => {
    function o(c) {
      function _() {
        c === f ? a(l) : o(f);
      }
      c.then(_, _);
    }
    o(f);
  });
}
function Qe(e) {
  var t = e.effects;
  if (t !== null) {
    e.effects = null;
    for (var n = 0; n < t.length; n += 1)
      $(
        /** @type {Effect} */
        t[n]
      );
  }
}
function Kt(e) {
  for (var t = e.parent; t !== null; ) {
    if ((t.f & g) === 0)
      return (t.f & I) === 0 ? (
        /** @type {Effect} */
        t
      ) : null;
    t = t.parent;
  }
  return null;
}
function Ne(e) {
  var t, n = h;
  ne(Kt(e));
  try {
    e.f &= ~H, Qe(e), t = _t(e);
  } finally {
    ne(n);
  }
  return t;
}
function Xe(e) {
  var t = Ne(e);
  if (!e.equals(t) && (e.wv = ct(), (!p?.is_fork || e.deps === null) && (e.v = t, e.deps === null))) {
    m(e, E);
    return;
  }
  W || (R !== null ? (De() || p?.is_fork) && R.set(e, t) : Fe(e));
}
let Ae = /* @__PURE__ */ new Set();
const L = /* @__PURE__ */ new Map();
let et = !1;
function Ce(e, t) {
  var n = {
    f: 0,
    // TODO ideally we could skip this altogether, but it causes type errors
    v: e,
    reactions: null,
    equals: Ge,
    rv: 0,
    wv: 0
  };
  return n;
}
// @__NO_SIDE_EFFECTS__
function M(e, t) {
  const n = Ce(e);
  return en(n), n;
}
function B(e, t, n = !1) {
  v !== null && // since we are untracking the function inside `$inspect.with` we need to add this check
  // to ensure we error if state is set inside an inspect effect
  (!S || (v.f & Ie) !== 0) && He() && (v.f & (g | P | Se | Ie)) !== 0 && !C?.includes(e) && Ot();
  let s = n ? re(t) : t;
  return ke(e, s);
}
function ke(e, t) {
  if (!e.equals(t)) {
    var n = e.v;
    W ? L.set(e, t) : L.set(e, n), e.v = t;
    var s = ee.ensure();
    if (s.capture(e, n), (e.f & g) !== 0) {
      const r = (
        /** @type {Derived} */
        e
      );
      (e.f & T) !== 0 && Ne(r), Fe(r);
    }
    e.wv = ct(), tt(e, T), h !== null && (h.f & E) !== 0 && (h.f & (Y | Z)) === 0 && (A === null ? tn([e]) : A.push(e)), !s.is_fork && Ae.size > 0 && !et && Bt();
  }
  return t;
}
function Bt() {
  et = !1;
  var e = z;
  pe(!0);
  const t = Array.from(Ae);
  try {
    for (const n of t)
      (n.f & E) !== 0 && m(n, K), ue(n) && ie(n);
  } finally {
    pe(e);
  }
  Ae.clear();
}
function fe(e) {
  B(e, e.v + 1);
}
function tt(e, t) {
  var n = e.reactions;
  if (n !== null)
    for (var s = n.length, r = 0; r < s; r++) {
      var f = n[r], l = f.f, u = (l & T) === 0;
      if (u && m(f, t), (l & g) !== 0) {
        var i = (
          /** @type {Derived} */
          f
        );
        R?.delete(i), (l & H) === 0 && (l & k && (f.f |= H), tt(i, K));
      } else u && ((l & P) !== 0 && N !== null && N.add(
        /** @type {Effect} */
        f
      ), te(
        /** @type {Effect} */
        f
      ));
    }
}
function re(e) {
  if (typeof e != "object" || e === null || Ee in e)
    return e;
  const t = Et(e);
  if (t !== yt && t !== gt)
    return e;
  var n = /* @__PURE__ */ new Map(), s = pt(e), r = /* @__PURE__ */ M(0), f = G, l = (u) => {
    if (G === f)
      return u();
    var i = v, a = G;
    U(null), Ye(f);
    var o = u();
    return U(i), Ye(a), o;
  };
  return s && n.set("length", /* @__PURE__ */ M(
    /** @type {any[]} */
    e.length
  )), new Proxy(
    /** @type {any} */
    e,
    {
      defineProperty(u, i, a) {
        (!("value" in a) || a.configurable === !1 || a.enumerable === !1 || a.writable === !1) && St();
        var o = n.get(i);
        return o === void 0 ? o = l(() => {
          var c = /* @__PURE__ */ M(a.value);
          return n.set(i, c), c;
        }) : B(o, a.value, !0), !0;
      },
      deleteProperty(u, i) {
        var a = n.get(i);
        if (a === void 0) {
          if (i in u) {
            const o = l(() => /* @__PURE__ */ M(y));
            n.set(i, o), fe(r);
          }
        } else
          B(a, y), fe(r);
        return !0;
      },
      get(u, i, a) {
        if (i === Ee)
          return e;
        var o = n.get(i), c = i in u;
        if (o === void 0 && (!c || se(u, i)?.writable) && (o = l(() => {
          var d = re(c ? u[i] : y), w = /* @__PURE__ */ M(d);
          return w;
        }), n.set(i, o)), o !== void 0) {
          var _ = X(o);
          return _ === y ? void 0 : _;
        }
        return Reflect.get(u, i, a);
      },
      getOwnPropertyDescriptor(u, i) {
        var a = Reflect.getOwnPropertyDescriptor(u, i);
        if (a && "value" in a) {
          var o = n.get(i);
          o && (a.value = X(o));
        } else if (a === void 0) {
          var c = n.get(i), _ = c?.v;
          if (c !== void 0 && _ !== y)
            return {
              enumerable: !0,
              configurable: !0,
              value: _,
              writable: !0
            };
        }
        return a;
      },
      has(u, i) {
        if (i === Ee)
          return !0;
        var a = n.get(i), o = a !== void 0 && a.v !== y || Reflect.has(u, i);
        if (a !== void 0 || h !== null && (!o || se(u, i)?.writable)) {
          a === void 0 && (a = l(() => {
            var _ = o ? re(u[i]) : y, d = /* @__PURE__ */ M(_);
            return d;
          }), n.set(i, a));
          var c = X(a);
          if (c === y)
            return !1;
        }
        return o;
      },
      set(u, i, a, o) {
        var c = n.get(i), _ = i in u;
        if (s && i === "length")
          for (var d = a; d < /** @type {Source<number>} */
          c.v; d += 1) {
            var w = n.get(d + "");
            w !== void 0 ? B(w, y) : d in u && (w = l(() => /* @__PURE__ */ M(y)), n.set(d + "", w));
          }
        if (c === void 0)
          (!_ || se(u, i)?.writable) && (c = l(() => /* @__PURE__ */ M(void 0)), B(c, re(a)), n.set(i, c));
        else {
          _ = c.v !== y;
          var ae = l(() => re(a));
          B(c, ae);
        }
        var oe = Reflect.getOwnPropertyDescriptor(u, i);
        if (oe?.set && oe.set.call(o, a), !_) {
          if (s && typeof i == "string") {
            var Me = (
              /** @type {Source<number>} */
              n.get("length")
            ), ge = Number(i);
            Number.isInteger(ge) && ge >= Me.v && B(Me, ge + 1);
          }
          fe(r);
        }
        return !0;
      },
      ownKeys(u) {
        X(r);
        var i = Reflect.ownKeys(u).filter((c) => {
          var _ = n.get(c);
          return _ === void 0 || _.v !== y;
        });
        for (var [a, o] of n)
          o.v !== y && !(a in u) && i.push(a);
        return i;
      },
      setPrototypeOf() {
        Ft();
      }
    }
  );
}
var Le, Vt, nt, rt;
function pn() {
  if (Le === void 0) {
    Le = window, Vt = /Firefox/.test(navigator.userAgent);
    var e = Element.prototype, t = Node.prototype, n = Text.prototype;
    nt = se(t, "firstChild").get, rt = se(t, "nextSibling").get, je(e) && (e.__click = void 0, e.__className = void 0, e.__attributes = null, e.__style = void 0, e.__e = void 0), je(n) && (n.__t = void 0);
  }
}
function wn(e = "") {
  return document.createTextNode(e);
}
// @__NO_SIDE_EFFECTS__
function zt(e) {
  return (
    /** @type {TemplateNode | null} */
    nt.call(e)
  );
}
// @__NO_SIDE_EFFECTS__
function Pe(e) {
  return (
    /** @type {TemplateNode | null} */
    rt.call(e)
  );
}
function yn(e, t) {
  return /* @__PURE__ */ zt(e);
}
function gn(e, t = 1, n = !1) {
  let s = e;
  for (; t--; )
    s = /** @type {TemplateNode} */
    /* @__PURE__ */ Pe(s);
  return s;
}
function st(e) {
  var t = v, n = h;
  U(null), ne(null);
  try {
    return e();
  } finally {
    U(t), ne(n);
  }
}
function Gt(e) {
  h === null && (v === null && kt(), At()), W && Tt();
}
function Ht(e, t) {
  var n = t.last;
  n === null ? t.last = t.first = e : (n.next = e, e.prev = n, t.last = e);
}
function D(e, t, n) {
  var s = h;
  s !== null && (s.f & j) !== 0 && (e |= j);
  var r = {
    ctx: O,
    deps: null,
    nodes: null,
    f: e | T | k,
    first: null,
    fn: t,
    last: null,
    next: null,
    parent: s,
    b: s && s.b,
    prev: null,
    teardown: null,
    wv: 0,
    ac: null
  };
  if (n)
    try {
      ie(r), r.f |= Re;
    } catch (u) {
      throw $(r), u;
    }
  else t !== null && te(r);
  var f = r;
  if (n && f.deps === null && f.teardown === null && f.nodes === null && f.first === f.last && // either `null`, or a singular child
  (f.f & le) === 0 && (f = f.first, (e & P) !== 0 && (e & be) !== 0 && f !== null && (f.f |= be)), f !== null && (f.parent = s, s !== null && Ht(f, s), v !== null && (v.f & g) !== 0 && (e & Z) === 0)) {
    var l = (
      /** @type {Derived} */
      v
    );
    (l.effects ??= []).push(f);
  }
  return r;
}
function De() {
  return v !== null && !S;
}
function $t(e) {
  const t = D(ye, null, !1);
  return m(t, E), t.teardown = e, t;
}
function En(e) {
  Gt();
  var t = (
    /** @type {Effect} */
    h.f
  ), n = !v && (t & Y) !== 0 && (t & Re) === 0;
  if (n) {
    var s = (
      /** @type {ComponentContext} */
      O
    );
    (s.e ??= []).push(e);
  } else
    return ft(e);
}
function ft(e) {
  return D(ve | bt, e, !1);
}
function mn(e) {
  ee.ensure();
  const t = D(Z | le, e, !0);
  return (n = {}) => new Promise((s) => {
    n.outro ? Xt(t, () => {
      $(t), s(void 0);
    }) : ($(t), s(void 0));
  });
}
function bn(e) {
  return D(ve, e, !1);
}
function Wt(e) {
  return D(Se | le, e, !0);
}
function Zt(e, t = 0) {
  return D(ye | t, e, !0);
}
function xn(e, t = [], n = [], s = []) {
  qt(s, t, n, (r) => {
    D(ye, () => e(...r.map(X)), !0);
  });
}
function Tn(e, t = 0) {
  var n = D(P | t, e, !0);
  return n;
}
function An(e) {
  return D(Y | le, e, !0);
}
function it(e) {
  var t = e.teardown;
  if (t !== null) {
    const n = W, s = v;
    Ue(!0), U(null);
    try {
      t.call(null);
    } finally {
      Ue(n), U(s);
    }
  }
}
function lt(e, t = !1) {
  var n = e.first;
  for (e.first = e.last = null; n !== null; ) {
    const r = n.ac;
    r !== null && st(() => {
      r.abort(J);
    });
    var s = n.next;
    (n.f & Z) !== 0 ? n.parent = null : $(n, t), n = s;
  }
}
function Jt(e) {
  for (var t = e.first; t !== null; ) {
    var n = t.next;
    (t.f & Y) === 0 && $(t), t = n;
  }
}
function $(e, t = !0) {
  var n = !1;
  (t || (e.f & ze) !== 0) && e.nodes !== null && e.nodes.end !== null && (Qt(
    e.nodes.start,
    /** @type {TemplateNode} */
    e.nodes.end
  ), n = !0), lt(e, t && !n), we(e, 0), m(e, I);
  var s = e.nodes && e.nodes.t;
  if (s !== null)
    for (const f of s)
      f.stop();
  it(e);
  var r = e.parent;
  r !== null && r.first !== null && ut(e), e.next = e.prev = e.teardown = e.ctx = e.deps = e.fn = e.nodes = e.ac = null;
}
function Qt(e, t) {
  for (; e !== null; ) {
    var n = e === t ? null : /* @__PURE__ */ Pe(e);
    e.remove(), e = n;
  }
}
function ut(e) {
  var t = e.parent, n = e.prev, s = e.next;
  n !== null && (n.next = s), s !== null && (s.prev = n), t !== null && (t.first === e && (t.first = s), t.last === e && (t.last = n));
}
function Xt(e, t, n = !0) {
  var s = [];
  at(e, s, !0);
  var r = () => {
    n && $(e), t && t();
  }, f = s.length;
  if (f > 0) {
    var l = () => --f || r();
    for (var u of s)
      u.out(l);
  } else
    r();
}
function at(e, t, n) {
  if ((e.f & j) === 0) {
    e.f ^= j;
    var s = e.nodes && e.nodes.t;
    if (s !== null)
      for (const u of s)
        (u.is_global || n) && t.push(u);
    for (var r = e.first; r !== null; ) {
      var f = r.next, l = (r.f & be) !== 0 || // If this is a branch effect without a block effect parent,
      // it means the parent block effect was pruned. In that case,
      // transparency information was transferred to the branch effect.
      (r.f & Y) !== 0 && (e.f & P) !== 0;
      at(r, t, l ? n : !1), r = f;
    }
  }
}
function kn(e, t) {
  if (e.nodes)
    for (var n = e.nodes.start, s = e.nodes.end; n !== null; ) {
      var r = n === s ? null : /* @__PURE__ */ Pe(n);
      t.append(n), n = r;
    }
}
let z = !1;
function pe(e) {
  z = e;
}
let W = !1;
function Ue(e) {
  W = e;
}
let v = null, S = !1;
function U(e) {
  v = e;
}
let h = null;
function ne(e) {
  h = e;
}
let C = null;
function en(e) {
  v !== null && (C === null ? C = [e] : C.push(e));
}
let b = null, x = 0, A = null;
function tn(e) {
  A = e;
}
let ot = 1, V = 0, G = V;
function Ye(e) {
  G = e;
}
function ct() {
  return ++ot;
}
function ue(e) {
  var t = e.f;
  if ((t & T) !== 0)
    return !0;
  if (t & g && (e.f &= ~H), (t & K) !== 0) {
    for (var n = (
      /** @type {Value[]} */
      e.deps
    ), s = n.length, r = 0; r < s; r++) {
      var f = n[r];
      if (ue(
        /** @type {Derived} */
        f
      ) && Xe(
        /** @type {Derived} */
        f
      ), f.wv > e.wv)
        return !0;
    }
    (t & k) !== 0 && // During time traveling we don't want to reset the status so that
    // traversal of the graph in the other batches still happens
    R === null && m(e, E);
  }
  return !1;
}
function vt(e, t, n = !0) {
  var s = e.reactions;
  if (s !== null && !C?.includes(e))
    for (var r = 0; r < s.length; r++) {
      var f = s[r];
      (f.f & g) !== 0 ? vt(
        /** @type {Derived} */
        f,
        t,
        !1
      ) : t === f && (n ? m(f, T) : (f.f & E) !== 0 && m(f, K), te(
        /** @type {Effect} */
        f
      ));
    }
}
function _t(e) {
  var t = b, n = x, s = A, r = v, f = C, l = O, u = S, i = G, a = e.f;
  b = /** @type {null | Value[]} */
  null, x = 0, A = null, v = (a & (Y | Z)) === 0 ? e : null, C = null, _e(e.ctx), S = !1, G = ++V, e.ac !== null && (st(() => {
    e.ac.abort(J);
  }), e.ac = null);
  try {
    e.f |= xe;
    var o = (
      /** @type {Function} */
      e.fn
    ), c = o(), _ = e.deps;
    if (b !== null) {
      var d;
      if (we(e, x), _ !== null && x > 0)
        for (_.length = x + b.length, d = 0; d < b.length; d++)
          _[x + d] = b[d];
      else
        e.deps = _ = b;
      if (De() && (e.f & k) !== 0)
        for (d = x; d < _.length; d++)
          (_[d].reactions ??= []).push(e);
    } else _ !== null && x < _.length && (we(e, x), _.length = x);
    if (He() && A !== null && !S && _ !== null && (e.f & (g | K | T)) === 0)
      for (d = 0; d < /** @type {Source[]} */
      A.length; d++)
        vt(
          A[d],
          /** @type {Effect} */
          e
        );
    if (r !== null && r !== e) {
      if (V++, r.deps !== null)
        for (let w = 0; w < n; w += 1)
          r.deps[w].rv = V;
      if (t !== null)
        for (const w of t)
          w.rv = V;
      A !== null && (s === null ? s = A : s.push(.../** @type {Source[]} */
      A));
    }
    return (e.f & q) !== 0 && (e.f ^= q), c;
  } catch (w) {
    return Pt(w);
  } finally {
    e.f ^= xe, b = t, x = n, A = s, v = r, C = f, _e(l), S = u, G = i;
  }
}
function nn(e, t) {
  let n = t.reactions;
  if (n !== null) {
    var s = wt.call(n, e);
    if (s !== -1) {
      var r = n.length - 1;
      r === 0 ? n = t.reactions = null : (n[s] = n[r], n.pop());
    }
  }
  if (n === null && (t.f & g) !== 0 && // Destroying a child effect while updating a parent effect can cause a dependency to appear
  // to be unused, when in fact it is used by the currently-updating parent. Checking `new_deps`
  // allows us to skip the expensive work of disconnecting and immediately reconnecting it
  (b === null || !b.includes(t))) {
    var f = (
      /** @type {Derived} */
      t
    );
    (f.f & k) !== 0 && (f.f ^= k, f.f &= ~H), Fe(f), Qe(f), we(f, 0);
  }
}
function we(e, t) {
  var n = e.deps;
  if (n !== null)
    for (var s = t; s < n.length; s++)
      nn(e, n[s]);
}
function ie(e) {
  var t = e.f;
  if ((t & I) === 0) {
    m(e, E);
    var n = h, s = z;
    h = e, z = !0;
    try {
      (t & (P | Be)) !== 0 ? Jt(e) : lt(e), it(e);
      var r = _t(e);
      e.teardown = typeof r == "function" ? r : null, e.wv = ot;
      var f;
      me && Nt && (e.f & T) !== 0 && e.deps;
    } finally {
      z = s, h = n;
    }
  }
}
function X(e) {
  var t = e.f, n = (t & g) !== 0;
  if (v !== null && !S) {
    var s = h !== null && (h.f & I) !== 0;
    if (!s && !C?.includes(e)) {
      var r = v.deps;
      if ((v.f & xe) !== 0)
        e.rv < V && (e.rv = V, b === null && r !== null && r[x] === e ? x++ : b === null ? b = [e] : b.push(e));
      else {
        (v.deps ??= []).push(e);
        var f = e.reactions;
        f === null ? e.reactions = [v] : f.includes(v) || f.push(v);
      }
    }
  }
  if (W && L.has(e))
    return L.get(e);
  if (n) {
    var l = (
      /** @type {Derived} */
      e
    );
    if (W) {
      var u = l.v;
      return ((l.f & E) === 0 && l.reactions !== null || ht(l)) && (u = Ne(l)), L.set(l, u), u;
    }
    var i = (l.f & k) === 0 && !S && v !== null && (z || (v.f & k) !== 0), a = l.deps === null;
    ue(l) && (i && (l.f |= k), Xe(l)), i && !a && dt(l);
  }
  if (R?.has(e))
    return R.get(e);
  if ((e.f & q) !== 0)
    throw e.v;
  return e.v;
}
function dt(e) {
  if (e.deps !== null) {
    e.f |= k;
    for (const t of e.deps)
      (t.reactions ??= []).push(e), (t.f & g) !== 0 && (t.f & k) === 0 && dt(
        /** @type {Derived} */
        t
      );
  }
}
function ht(e) {
  if (e.v === y) return !0;
  if (e.deps === null) return !1;
  for (const t of e.deps)
    if (L.has(t) || (t.f & g) !== 0 && ht(
      /** @type {Derived} */
      t
    ))
      return !0;
  return !1;
}
function rn(e) {
  var t = S;
  try {
    return S = !0, e();
  } finally {
    S = t;
  }
}
export {
  pn as $,
  Xt as A,
  ee as B,
  wn as C,
  Mt as D,
  ne as E,
  U as F,
  _e as G,
  Pt as H,
  v as I,
  O as J,
  kn as K,
  m as L,
  T as M,
  fn as N,
  te as O,
  K as P,
  ke as Q,
  $ as R,
  Ee as S,
  sn as T,
  de as U,
  vn as V,
  Ce as W,
  be as X,
  le as Y,
  Ve as Z,
  un as _,
  zt as a,
  ln as a0,
  mn as a1,
  Vt as b,
  h as c,
  an as d,
  bn as e,
  De as f,
  Et as g,
  hn as h,
  pt as i,
  X as j,
  B as k,
  En as l,
  dn as m,
  on as n,
  yt as o,
  re as p,
  $e as q,
  Zt as r,
  M as s,
  xn as t,
  rn as u,
  _n as v,
  yn as w,
  gn as x,
  Tn as y,
  An as z
};
