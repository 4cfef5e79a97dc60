const fn = 2, y = /* @__PURE__ */ Symbol(), ln = "http://www.w3.org/1999/xhtml", xe = !1;
var yt = Array.isArray, gt = Array.prototype.indexOf, un = Array.from, an = Object.defineProperty, se = Object.getOwnPropertyDescriptor, on = Object.getOwnPropertyDescriptors, mt = Object.prototype, Et = Array.prototype, bt = Object.getPrototypeOf, je = Object.isExtensible;
function cn(e) {
  return typeof e == "function";
}
const _n = () => {
};
function xt(e) {
  for (var t = 0; t < e.length; t++)
    e[t]();
}
function Ke() {
  var e, t, n = new Promise((s, r) => {
    e = s, t = r;
  });
  return { promise: n, resolve: e, reject: t };
}
const g = 2, _e = 4, ge = 8, Be = 1 << 24, D = 16, M = 32, J = 64, Ge = 128, k = 512, m = 1024, x = 2048, K = 4096, O = 8192, q = 16384, Re = 32768, ve = 65536, Ie = 1 << 17, Ve = 1 << 18, le = 1 << 19, Tt = 1 << 20, H = 32768, Te = 1 << 21, Fe = 1 << 22, L = 1 << 23, be = /* @__PURE__ */ Symbol("$state"), vn = /* @__PURE__ */ Symbol("legacy props"), Q = new class extends Error {
  name = "StaleReactionError";
  message = "The reaction that called `getAbortSignal()` was re-run or destroyed";
}();
function At() {
  throw new Error("https://svelte.dev/e/async_derived_orphan");
}
function kt(e) {
  throw new Error("https://svelte.dev/e/effect_in_teardown");
}
function St() {
  throw new Error("https://svelte.dev/e/effect_in_unowned_derived");
}
function Rt(e) {
  throw new Error("https://svelte.dev/e/effect_orphan");
}
function Ft() {
  throw new Error("https://svelte.dev/e/effect_update_depth_exceeded");
}
function Ot() {
  throw new Error("https://svelte.dev/e/state_descriptors_fixed");
}
function Ct() {
  throw new Error("https://svelte.dev/e/state_prototype_fixed");
}
function Pt() {
  throw new Error("https://svelte.dev/e/state_unsafe_mutation");
}
function hn() {
  throw new Error("https://svelte.dev/e/svelte_boundary_reset_onerror");
}
function ze(e) {
  return e === this.v;
}
let Nt = !1, C = null;
function de(e) {
  C = e;
}
function pn(e, t = !1, n) {
  C = {
    p: C,
    i: !1,
    c: null,
    e: null,
    s: e,
    x: null,
    l: null
  };
}
function wn(e) {
  var t = (
    /** @type {ComponentContext} */
    C
  ), n = t.e;
  if (n !== null) {
    t.e = null;
    for (var s of n)
      it(s);
  }
  return t.i = !0, C = t.p, /** @type {T} */
  {};
}
function He() {
  return !0;
}
let X = [];
function Dt() {
  var e = X;
  X = [], xt(e);
}
function $e(e) {
  if (X.length === 0) {
    var t = X;
    queueMicrotask(() => {
      t === X && Dt();
    });
  }
  X.push(e);
}
function Mt(e) {
  var t = h;
  if (t === null)
    return _.f |= L, e;
  if ((t.f & Re) === 0) {
    if ((t.f & Ge) === 0)
      throw e;
    t.b.error(e);
  } else
    he(e, t);
}
function he(e, t) {
  for (; t !== null; ) {
    if ((t.f & Ge) !== 0)
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
const jt = -7169;
function E(e, t) {
  e.f = e.f & jt | t;
}
function Oe(e) {
  (e.f & k) !== 0 || e.deps === null ? E(e, m) : E(e, K);
}
function We(e) {
  if (e !== null)
    for (const t of e)
      (t.f & g) === 0 || (t.f & H) === 0 || (t.f ^= H, We(
        /** @type {Derived} */
        t.deps
      ));
}
function It(e, t, n) {
  (e.f & x) !== 0 ? t.add(e) : (e.f & K) !== 0 && n.add(e), We(e.deps), E(e, m);
}
const ce = /* @__PURE__ */ new Set();
let p = null, S = null, F = [], Ce = null, Ae = !1;
class te {
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
    this.is_fork || this.#a(), this.is_deferred() ? (this.#u(s), this.#u(n)) : (p = null, qe(s), qe(n), this.#i?.resolve()), S = null;
  }
  /**
   * Traverse the effect tree, executing effects or stashing
   * them for later execution as appropriate
   * @param {Effect} root
   * @param {Effect[]} effects
   * @param {Effect[]} render_effects
   */
  #l(t, n, s) {
    t.f ^= m;
    for (var r = t.first, f = null; r !== null; ) {
      var l = r.f, u = (l & (M | J)) !== 0, i = u && (l & m) !== 0, a = i || (l & O) !== 0 || this.skipped_effects.has(r);
      if (!a && r.fn !== null) {
        u ? r.f ^= m : f !== null && (l & (_e | ge | Be)) !== 0 ? f.b.defer_effect(r) : (l & _e) !== 0 ? n.push(r) : ue(r) && ((l & D) !== 0 && this.#s.add(r), ie(r));
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
      It(t[n], this.#s, this.#f);
  }
  /**
   * Associate a change to a given source with the current
   * batch, noting its previous and current values
   * @param {Source} source
   * @param {any} value
   */
  capture(t, n) {
    n !== y && !this.previous.has(t) && this.previous.set(t, n), (t.f & L) === 0 && (this.current.set(t, t.v), S?.set(t, t.v));
  }
  activate() {
    p = this, this.apply();
  }
  deactivate() {
    p === this && (p = null, S = null);
  }
  flush() {
    if (this.activate(), F.length > 0) {
      if (qt(), p !== null && p !== this)
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
      var t = S, n = !0;
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
      p = null, S = t;
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
      this.#f.delete(t), E(t, x), $(t);
    for (const t of this.#f)
      E(t, K), $(t);
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
      const t = p = new te();
      ce.add(p), te.enqueue(() => {
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
function qt() {
  var e = V;
  Ae = !0;
  var t = null;
  try {
    var n = 0;
    for (we(!0); F.length > 0; ) {
      var s = te.ensure();
      if (n++ > 1e3) {
        var r, f;
        Lt();
      }
      s.process(F), Y.clear();
    }
  } finally {
    Ae = !1, we(e), Ce = null;
  }
}
function Lt() {
  try {
    Ft();
  } catch (e) {
    he(e, Ce);
  }
}
let P = null;
function qe(e) {
  var t = e.length;
  if (t !== 0) {
    for (var n = 0; n < t; ) {
      var s = e[n++];
      if ((s.f & (q | O)) === 0 && ue(s) && (P = /* @__PURE__ */ new Set(), ie(s), s.deps === null && s.first === null && s.nodes === null && (s.teardown === null && s.ac === null ? at(s) : s.fn = null), P?.size > 0)) {
        Y.clear();
        for (const r of P) {
          if ((r.f & (q | O)) !== 0) continue;
          const f = [r];
          let l = r.parent;
          for (; l !== null; )
            P.has(l) && (P.delete(l), f.push(l)), l = l.parent;
          for (let u = f.length - 1; u >= 0; u--) {
            const i = f[u];
            (i.f & (q | O)) === 0 && ie(i);
          }
        }
        P.clear();
      }
    }
    P = null;
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
      ) : (f & (Fe | D)) !== 0 && (f & x) === 0 && Je(r, t, s) && (E(r, x), $(
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
function $(e) {
  for (var t = Ce = e; t.parent !== null; ) {
    t = t.parent;
    var n = t.f;
    if (Ae && t === h && (n & D) !== 0 && (n & Ve) === 0)
      return;
    if ((n & (J | M)) !== 0) {
      if ((n & m) === 0) return;
      t.f ^= m;
    }
  }
  F.push(t);
}
function yn(e) {
  let t = 0, n = Ne(0), s;
  return () => {
    De() && (ee(n), Jt(() => (t === 0 && (s = sn(() => e(() => fe(n)))), t += 1, () => {
      $e(() => {
        t -= 1, t === 0 && (s?.(), s = void 0, fe(n));
      });
    })));
  };
}
function Yt(e, t, n, s) {
  const r = Kt;
  if (n.length === 0 && e.length === 0) {
    s(t.map(r));
    return;
  }
  var f = p, l = (
    /** @type {Effect} */
    h
  ), u = Ut();
  function i() {
    Promise.all(n.map((a) => /* @__PURE__ */ Bt(a))).then((a) => {
      u();
      try {
        s([...t.map(r), ...a]);
      } catch (o) {
        (l.f & q) === 0 && he(o, l);
      }
      f?.deactivate(), pe();
    }).catch((a) => {
      he(a, l);
    });
  }
  e.length > 0 ? Promise.all(e).then(() => {
    u();
    try {
      return i();
    } finally {
      f?.deactivate(), pe();
    }
  }) : i();
}
function Ut() {
  var e = h, t = _, n = C, s = p;
  return function(f = !0) {
    ne(e), U(t), de(n), f && s?.activate();
  };
}
function pe() {
  ne(null), U(null), de(null);
}
// @__NO_SIDE_EFFECTS__
function Kt(e) {
  var t = g | x, n = _ !== null && (_.f & g) !== 0 ? (
    /** @type {Derived} */
    _
  ) : null;
  return h !== null && (h.f |= le), {
    ctx: C,
    deps: null,
    effects: null,
    equals: ze,
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
function Bt(e, t, n) {
  let s = (
    /** @type {Effect | null} */
    h
  );
  s === null && At();
  var r = (
    /** @type {Boundary} */
    s.b
  ), f = (
    /** @type {Promise<V>} */
    /** @type {unknown} */
    void 0
  ), l = Ne(
    /** @type {V} */
    y
  ), u = !_, i = /* @__PURE__ */ new Map();
  return Zt(() => {
    var a = Ke();
    f = a.promise;
    try {
      Promise.resolve(e()).then(a.resolve, a.reject).then(() => {
        o === p && o.committed && o.deactivate(), pe();
      });
    } catch (d) {
      a.reject(d), pe();
    }
    var o = (
      /** @type {Batch} */
      p
    );
    if (u) {
      var c = r.is_rendered();
      r.update_pending_count(1), o.increment(c), i.get(o)?.reject(Q), i.delete(o), i.set(o, a);
    }
    const v = (d, w = void 0) => {
      if (o.activate(), w)
        w !== Q && (l.f |= L, Se(l, w));
      else {
        (l.f & L) !== 0 && (l.f ^= L), Se(l, d);
        for (const [ae, oe] of i) {
          if (i.delete(ae), ae === o) break;
          oe.reject(Q);
        }
      }
      u && (r.update_pending_count(-1), o.decrement(c));
    };
    a.promise.then(v, (d) => v(null, d || "unknown"));
  }), Wt(() => {
    for (const a of i.values())
      a.reject(Q);
  }), new Promise((a) => {
    function o(c) {
      function v() {
        c === f ? a(l) : o(f);
      }
      c.then(v, v);
    }
    o(f);
  });
}
function Qe(e) {
  var t = e.effects;
  if (t !== null) {
    e.effects = null;
    for (var n = 0; n < t.length; n += 1)
      W(
        /** @type {Effect} */
        t[n]
      );
  }
}
function Gt(e) {
  for (var t = e.parent; t !== null; ) {
    if ((t.f & g) === 0)
      return (t.f & q) === 0 ? (
        /** @type {Effect} */
        t
      ) : null;
    t = t.parent;
  }
  return null;
}
function Pe(e) {
  var t, n = h;
  ne(Gt(e));
  try {
    e.f &= ~H, Qe(e), t = ht(e);
  } finally {
    ne(n);
  }
  return t;
}
function Xe(e) {
  var t = Pe(e);
  if (!e.equals(t) && (e.wv = vt(), (!p?.is_fork || e.deps === null) && (e.v = t, e.deps === null))) {
    E(e, m);
    return;
  }
  Z || (S !== null ? (De() || p?.is_fork) && S.set(e, t) : Oe(e));
}
let ke = /* @__PURE__ */ new Set();
const Y = /* @__PURE__ */ new Map();
let et = !1;
function Ne(e, t) {
  var n = {
    f: 0,
    // TODO ideally we could skip this altogether, but it causes type errors
    v: e,
    reactions: null,
    equals: ze,
    rv: 0,
    wv: 0
  };
  return n;
}
// @__NO_SIDE_EFFECTS__
function I(e, t) {
  const n = Ne(e);
  return tn(n), n;
}
function B(e, t, n = !1) {
  _ !== null && // since we are untracking the function inside `$inspect.with` we need to add this check
  // to ensure we error if state is set inside an inspect effect
  (!R || (_.f & Ie) !== 0) && He() && (_.f & (g | D | Fe | Ie)) !== 0 && !N?.includes(e) && Pt();
  let s = n ? re(t) : t;
  return Se(e, s);
}
function Se(e, t) {
  if (!e.equals(t)) {
    var n = e.v;
    Z ? Y.set(e, t) : Y.set(e, n), e.v = t;
    var s = te.ensure();
    if (s.capture(e, n), (e.f & g) !== 0) {
      const r = (
        /** @type {Derived} */
        e
      );
      (e.f & x) !== 0 && Pe(r), Oe(r);
    }
    e.wv = vt(), tt(e, x), h !== null && (h.f & m) !== 0 && (h.f & (M | J)) === 0 && (A === null ? nn([e]) : A.push(e)), !s.is_fork && ke.size > 0 && !et && Vt();
  }
  return t;
}
function Vt() {
  et = !1;
  var e = V;
  we(!0);
  const t = Array.from(ke);
  try {
    for (const n of t)
      (n.f & m) !== 0 && E(n, K), ue(n) && ie(n);
  } finally {
    we(e);
  }
  ke.clear();
}
function fe(e) {
  B(e, e.v + 1);
}
function tt(e, t) {
  var n = e.reactions;
  if (n !== null)
    for (var s = n.length, r = 0; r < s; r++) {
      var f = n[r], l = f.f, u = (l & x) === 0;
      if (u && E(f, t), (l & g) !== 0) {
        var i = (
          /** @type {Derived} */
          f
        );
        S?.delete(i), (l & H) === 0 && (l & k && (f.f |= H), tt(i, K));
      } else u && ((l & D) !== 0 && P !== null && P.add(
        /** @type {Effect} */
        f
      ), $(
        /** @type {Effect} */
        f
      ));
    }
}
function re(e) {
  if (typeof e != "object" || e === null || be in e)
    return e;
  const t = bt(e);
  if (t !== mt && t !== Et)
    return e;
  var n = /* @__PURE__ */ new Map(), s = yt(e), r = /* @__PURE__ */ I(0), f = z, l = (u) => {
    if (z === f)
      return u();
    var i = _, a = z;
    U(null), Ue(f);
    var o = u();
    return U(i), Ue(a), o;
  };
  return s && n.set("length", /* @__PURE__ */ I(
    /** @type {any[]} */
    e.length
  )), new Proxy(
    /** @type {any} */
    e,
    {
      defineProperty(u, i, a) {
        (!("value" in a) || a.configurable === !1 || a.enumerable === !1 || a.writable === !1) && Ot();
        var o = n.get(i);
        return o === void 0 ? o = l(() => {
          var c = /* @__PURE__ */ I(a.value);
          return n.set(i, c), c;
        }) : B(o, a.value, !0), !0;
      },
      deleteProperty(u, i) {
        var a = n.get(i);
        if (a === void 0) {
          if (i in u) {
            const o = l(() => /* @__PURE__ */ I(y));
            n.set(i, o), fe(r);
          }
        } else
          B(a, y), fe(r);
        return !0;
      },
      get(u, i, a) {
        if (i === be)
          return e;
        var o = n.get(i), c = i in u;
        if (o === void 0 && (!c || se(u, i)?.writable) && (o = l(() => {
          var d = re(c ? u[i] : y), w = /* @__PURE__ */ I(d);
          return w;
        }), n.set(i, o)), o !== void 0) {
          var v = ee(o);
          return v === y ? void 0 : v;
        }
        return Reflect.get(u, i, a);
      },
      getOwnPropertyDescriptor(u, i) {
        var a = Reflect.getOwnPropertyDescriptor(u, i);
        if (a && "value" in a) {
          var o = n.get(i);
          o && (a.value = ee(o));
        } else if (a === void 0) {
          var c = n.get(i), v = c?.v;
          if (c !== void 0 && v !== y)
            return {
              enumerable: !0,
              configurable: !0,
              value: v,
              writable: !0
            };
        }
        return a;
      },
      has(u, i) {
        if (i === be)
          return !0;
        var a = n.get(i), o = a !== void 0 && a.v !== y || Reflect.has(u, i);
        if (a !== void 0 || h !== null && (!o || se(u, i)?.writable)) {
          a === void 0 && (a = l(() => {
            var v = o ? re(u[i]) : y, d = /* @__PURE__ */ I(v);
            return d;
          }), n.set(i, a));
          var c = ee(a);
          if (c === y)
            return !1;
        }
        return o;
      },
      set(u, i, a, o) {
        var c = n.get(i), v = i in u;
        if (s && i === "length")
          for (var d = a; d < /** @type {Source<number>} */
          c.v; d += 1) {
            var w = n.get(d + "");
            w !== void 0 ? B(w, y) : d in u && (w = l(() => /* @__PURE__ */ I(y)), n.set(d + "", w));
          }
        if (c === void 0)
          (!v || se(u, i)?.writable) && (c = l(() => /* @__PURE__ */ I(void 0)), B(c, re(a)), n.set(i, c));
        else {
          v = c.v !== y;
          var ae = l(() => re(a));
          B(c, ae);
        }
        var oe = Reflect.getOwnPropertyDescriptor(u, i);
        if (oe?.set && oe.set.call(o, a), !v) {
          if (s && typeof i == "string") {
            var Me = (
              /** @type {Source<number>} */
              n.get("length")
            ), Ee = Number(i);
            Number.isInteger(Ee) && Ee >= Me.v && B(Me, Ee + 1);
          }
          fe(r);
        }
        return !0;
      },
      ownKeys(u) {
        ee(r);
        var i = Reflect.ownKeys(u).filter((c) => {
          var v = n.get(c);
          return v === void 0 || v.v !== y;
        });
        for (var [a, o] of n)
          o.v !== y && !(a in u) && i.push(a);
        return i;
      },
      setPrototypeOf() {
        Ct();
      }
    }
  );
}
var Le, zt, nt, rt;
function gn() {
  if (Le === void 0) {
    Le = window, zt = /Firefox/.test(navigator.userAgent);
    var e = Element.prototype, t = Node.prototype, n = Text.prototype;
    nt = se(t, "firstChild").get, rt = se(t, "nextSibling").get, je(e) && (e.__click = void 0, e.__className = void 0, e.__attributes = null, e.__style = void 0, e.__e = void 0), je(n) && (n.__t = void 0);
  }
}
function mn(e = "") {
  return document.createTextNode(e);
}
// @__NO_SIDE_EFFECTS__
function st(e) {
  return (
    /** @type {TemplateNode | null} */
    nt.call(e)
  );
}
// @__NO_SIDE_EFFECTS__
function me(e) {
  return (
    /** @type {TemplateNode | null} */
    rt.call(e)
  );
}
function En(e, t) {
  return /* @__PURE__ */ st(e);
}
function bn(e, t = !1) {
  {
    var n = /* @__PURE__ */ st(e);
    return n instanceof Comment && n.data === "" ? /* @__PURE__ */ me(n) : n;
  }
}
function xn(e, t = 1, n = !1) {
  let s = e;
  for (; t--; )
    s = /** @type {TemplateNode} */
    /* @__PURE__ */ me(s);
  return s;
}
function Tn() {
  return !1;
}
function ft(e) {
  var t = _, n = h;
  U(null), ne(null);
  try {
    return e();
  } finally {
    U(t), ne(n);
  }
}
function Ht(e) {
  h === null && (_ === null && Rt(), St()), Z && kt();
}
function $t(e, t) {
  var n = t.last;
  n === null ? t.last = t.first = e : (n.next = e, e.prev = n, t.last = e);
}
function j(e, t, n) {
  var s = h;
  s !== null && (s.f & O) !== 0 && (e |= O);
  var r = {
    ctx: C,
    deps: null,
    nodes: null,
    f: e | x | k,
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
      throw W(r), u;
    }
  else t !== null && $(r);
  var f = r;
  if (n && f.deps === null && f.teardown === null && f.nodes === null && f.first === f.last && // either `null`, or a singular child
  (f.f & le) === 0 && (f = f.first, (e & D) !== 0 && (e & ve) !== 0 && f !== null && (f.f |= ve)), f !== null && (f.parent = s, s !== null && $t(f, s), _ !== null && (_.f & g) !== 0 && (e & J) === 0)) {
    var l = (
      /** @type {Derived} */
      _
    );
    (l.effects ??= []).push(f);
  }
  return r;
}
function De() {
  return _ !== null && !R;
}
function Wt(e) {
  const t = j(ge, null, !1);
  return E(t, m), t.teardown = e, t;
}
function An(e) {
  Ht();
  var t = (
    /** @type {Effect} */
    h.f
  ), n = !_ && (t & M) !== 0 && (t & Re) === 0;
  if (n) {
    var s = (
      /** @type {ComponentContext} */
      C
    );
    (s.e ??= []).push(e);
  } else
    return it(e);
}
function it(e) {
  return j(_e | Tt, e, !1);
}
function kn(e) {
  te.ensure();
  const t = j(J | le, e, !0);
  return (n = {}) => new Promise((s) => {
    n.outro ? en(t, () => {
      W(t), s(void 0);
    }) : (W(t), s(void 0));
  });
}
function Sn(e) {
  return j(_e, e, !1);
}
function Zt(e) {
  return j(Fe | le, e, !0);
}
function Jt(e, t = 0) {
  return j(ge | t, e, !0);
}
function Rn(e, t = [], n = [], s = []) {
  Yt(s, t, n, (r) => {
    j(ge, () => e(...r.map(ee)), !0);
  });
}
function Fn(e, t = 0) {
  var n = j(D | t, e, !0);
  return n;
}
function On(e) {
  return j(M | le, e, !0);
}
function lt(e) {
  var t = e.teardown;
  if (t !== null) {
    const n = Z, s = _;
    Ye(!0), U(null);
    try {
      t.call(null);
    } finally {
      Ye(n), U(s);
    }
  }
}
function ut(e, t = !1) {
  var n = e.first;
  for (e.first = e.last = null; n !== null; ) {
    const r = n.ac;
    r !== null && ft(() => {
      r.abort(Q);
    });
    var s = n.next;
    (n.f & J) !== 0 ? n.parent = null : W(n, t), n = s;
  }
}
function Qt(e) {
  for (var t = e.first; t !== null; ) {
    var n = t.next;
    (t.f & M) === 0 && W(t), t = n;
  }
}
function W(e, t = !0) {
  var n = !1;
  (t || (e.f & Ve) !== 0) && e.nodes !== null && e.nodes.end !== null && (Xt(
    e.nodes.start,
    /** @type {TemplateNode} */
    e.nodes.end
  ), n = !0), ut(e, t && !n), ye(e, 0), E(e, q);
  var s = e.nodes && e.nodes.t;
  if (s !== null)
    for (const f of s)
      f.stop();
  lt(e);
  var r = e.parent;
  r !== null && r.first !== null && at(e), e.next = e.prev = e.teardown = e.ctx = e.deps = e.fn = e.nodes = e.ac = null;
}
function Xt(e, t) {
  for (; e !== null; ) {
    var n = e === t ? null : /* @__PURE__ */ me(e);
    e.remove(), e = n;
  }
}
function at(e) {
  var t = e.parent, n = e.prev, s = e.next;
  n !== null && (n.next = s), s !== null && (s.prev = n), t !== null && (t.first === e && (t.first = s), t.last === e && (t.last = n));
}
function en(e, t, n = !0) {
  var s = [];
  ot(e, s, !0);
  var r = () => {
    n && W(e), t && t();
  }, f = s.length;
  if (f > 0) {
    var l = () => --f || r();
    for (var u of s)
      u.out(l);
  } else
    r();
}
function ot(e, t, n) {
  if ((e.f & O) === 0) {
    e.f ^= O;
    var s = e.nodes && e.nodes.t;
    if (s !== null)
      for (const u of s)
        (u.is_global || n) && t.push(u);
    for (var r = e.first; r !== null; ) {
      var f = r.next, l = (r.f & ve) !== 0 || // If this is a branch effect without a block effect parent,
      // it means the parent block effect was pruned. In that case,
      // transparency information was transferred to the branch effect.
      (r.f & M) !== 0 && (e.f & D) !== 0;
      ot(r, t, l ? n : !1), r = f;
    }
  }
}
function Cn(e) {
  ct(e, !0);
}
function ct(e, t) {
  if ((e.f & O) !== 0) {
    e.f ^= O, (e.f & m) === 0 && (E(e, x), $(e));
    for (var n = e.first; n !== null; ) {
      var s = n.next, r = (n.f & ve) !== 0 || (n.f & M) !== 0;
      ct(n, r ? t : !1), n = s;
    }
    var f = e.nodes && e.nodes.t;
    if (f !== null)
      for (const l of f)
        (l.is_global || t) && l.in();
  }
}
function Pn(e, t) {
  if (e.nodes)
    for (var n = e.nodes.start, s = e.nodes.end; n !== null; ) {
      var r = n === s ? null : /* @__PURE__ */ me(n);
      t.append(n), n = r;
    }
}
let V = !1;
function we(e) {
  V = e;
}
let Z = !1;
function Ye(e) {
  Z = e;
}
let _ = null, R = !1;
function U(e) {
  _ = e;
}
let h = null;
function ne(e) {
  h = e;
}
let N = null;
function tn(e) {
  _ !== null && (N === null ? N = [e] : N.push(e));
}
let b = null, T = 0, A = null;
function nn(e) {
  A = e;
}
let _t = 1, G = 0, z = G;
function Ue(e) {
  z = e;
}
function vt() {
  return ++_t;
}
function ue(e) {
  var t = e.f;
  if ((t & x) !== 0)
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
    S === null && E(e, m);
  }
  return !1;
}
function dt(e, t, n = !0) {
  var s = e.reactions;
  if (s !== null && !N?.includes(e))
    for (var r = 0; r < s.length; r++) {
      var f = s[r];
      (f.f & g) !== 0 ? dt(
        /** @type {Derived} */
        f,
        t,
        !1
      ) : t === f && (n ? E(f, x) : (f.f & m) !== 0 && E(f, K), $(
        /** @type {Effect} */
        f
      ));
    }
}
function ht(e) {
  var t = b, n = T, s = A, r = _, f = N, l = C, u = R, i = z, a = e.f;
  b = /** @type {null | Value[]} */
  null, T = 0, A = null, _ = (a & (M | J)) === 0 ? e : null, N = null, de(e.ctx), R = !1, z = ++G, e.ac !== null && (ft(() => {
    e.ac.abort(Q);
  }), e.ac = null);
  try {
    e.f |= Te;
    var o = (
      /** @type {Function} */
      e.fn
    ), c = o(), v = e.deps;
    if (b !== null) {
      var d;
      if (ye(e, T), v !== null && T > 0)
        for (v.length = T + b.length, d = 0; d < b.length; d++)
          v[T + d] = b[d];
      else
        e.deps = v = b;
      if (De() && (e.f & k) !== 0)
        for (d = T; d < v.length; d++)
          (v[d].reactions ??= []).push(e);
    } else v !== null && T < v.length && (ye(e, T), v.length = T);
    if (He() && A !== null && !R && v !== null && (e.f & (g | K | x)) === 0)
      for (d = 0; d < /** @type {Source[]} */
      A.length; d++)
        dt(
          A[d],
          /** @type {Effect} */
          e
        );
    if (r !== null && r !== e) {
      if (G++, r.deps !== null)
        for (let w = 0; w < n; w += 1)
          r.deps[w].rv = G;
      if (t !== null)
        for (const w of t)
          w.rv = G;
      A !== null && (s === null ? s = A : s.push(.../** @type {Source[]} */
      A));
    }
    return (e.f & L) !== 0 && (e.f ^= L), c;
  } catch (w) {
    return Mt(w);
  } finally {
    e.f ^= Te, b = t, T = n, A = s, _ = r, N = f, de(l), R = u, z = i;
  }
}
function rn(e, t) {
  let n = t.reactions;
  if (n !== null) {
    var s = gt.call(n, e);
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
    (f.f & k) !== 0 && (f.f ^= k, f.f &= ~H), Oe(f), Qe(f), ye(f, 0);
  }
}
function ye(e, t) {
  var n = e.deps;
  if (n !== null)
    for (var s = t; s < n.length; s++)
      rn(e, n[s]);
}
function ie(e) {
  var t = e.f;
  if ((t & q) === 0) {
    E(e, m);
    var n = h, s = V;
    h = e, V = !0;
    try {
      (t & (D | Be)) !== 0 ? Qt(e) : ut(e), lt(e);
      var r = ht(e);
      e.teardown = typeof r == "function" ? r : null, e.wv = _t;
      var f;
      xe && Nt && (e.f & x) !== 0 && e.deps;
    } finally {
      V = s, h = n;
    }
  }
}
function ee(e) {
  var t = e.f, n = (t & g) !== 0;
  if (_ !== null && !R) {
    var s = h !== null && (h.f & q) !== 0;
    if (!s && !N?.includes(e)) {
      var r = _.deps;
      if ((_.f & Te) !== 0)
        e.rv < G && (e.rv = G, b === null && r !== null && r[T] === e ? T++ : b === null ? b = [e] : b.push(e));
      else {
        (_.deps ??= []).push(e);
        var f = e.reactions;
        f === null ? e.reactions = [_] : f.includes(_) || f.push(_);
      }
    }
  }
  if (Z && Y.has(e))
    return Y.get(e);
  if (n) {
    var l = (
      /** @type {Derived} */
      e
    );
    if (Z) {
      var u = l.v;
      return ((l.f & m) === 0 && l.reactions !== null || wt(l)) && (u = Pe(l)), Y.set(l, u), u;
    }
    var i = (l.f & k) === 0 && !R && _ !== null && (V || (_.f & k) !== 0), a = l.deps === null;
    ue(l) && (i && (l.f |= k), Xe(l)), i && !a && pt(l);
  }
  if (S?.has(e))
    return S.get(e);
  if ((e.f & L) !== 0)
    throw e.v;
  return e.v;
}
function pt(e) {
  if (e.deps !== null) {
    e.f |= k;
    for (const t of e.deps)
      (t.reactions ??= []).push(e), (t.f & g) !== 0 && (t.f & k) === 0 && pt(
        /** @type {Derived} */
        t
      );
  }
}
function wt(e) {
  if (e.v === y) return !0;
  if (e.deps === null) return !1;
  for (const t of e.deps)
    if (Y.has(t) || (t.f & g) !== 0 && wt(
      /** @type {Derived} */
      t
    ))
      return !0;
  return !1;
}
function sn(e) {
  var t = R;
  try {
    return R = !0, e();
  } finally {
    R = t;
  }
}
export {
  C as $,
  re as A,
  ee as B,
  B as C,
  An as D,
  ve as E,
  pn as F,
  Rn as G,
  wn as H,
  En as I,
  xn as J,
  bn as K,
  vn as L,
  te as M,
  ln as N,
  It as O,
  ne as P,
  U as Q,
  de as R,
  be as S,
  fn as T,
  Mt as U,
  E as V,
  x as W,
  $ as X,
  K as Y,
  Se as Z,
  he as _,
  h as a,
  hn as a0,
  le as a1,
  Ge as a2,
  _ as a3,
  Ne as a4,
  an as a5,
  gn as a6,
  un as a7,
  kn as a8,
  st as b,
  mn as c,
  zt as d,
  p as e,
  W as f,
  bt as g,
  On as h,
  yt as i,
  Fn as j,
  on as k,
  Sn as l,
  Pn as m,
  Jt as n,
  mt as o,
  en as p,
  $e as q,
  Cn as r,
  Tn as s,
  _n as t,
  sn as u,
  cn as v,
  se as w,
  De as x,
  yn as y,
  I as z
};
