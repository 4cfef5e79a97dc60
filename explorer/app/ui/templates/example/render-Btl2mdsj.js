const kn = 2, w = /* @__PURE__ */ Symbol(), Ae = !1;
var St = Array.isArray, kt = Array.prototype.indexOf, At = Array.from, Rt = Object.defineProperty, ce = Object.getOwnPropertyDescriptor, Ft = Object.prototype, Nt = Array.prototype, Ot = Object.getPrototypeOf, Ue = Object.isExtensible;
function Ct(e) {
  for (var t = 0; t < e.length; t++)
    e[t]();
}
function We() {
  var e, t, n = new Promise((i, r) => {
    e = i, t = r;
  });
  return { promise: n, resolve: e, reject: t };
}
const y = 2, Re = 4, xe = 8, Ze = 1 << 24, L = 16, te = 32, ne = 64, Pe = 128, A = 512, b = 1024, T = 2048, V = 4096, Y = 8192, B = 16384, Je = 32768, we = 65536, Ye = 1 << 17, Qe = 1 << 18, ae = 1 << 19, Pt = 1 << 20, ee = 32768, Fe = 1 << 21, De = 1 << 22, K = 1 << 23, ke = /* @__PURE__ */ Symbol("$state"), ie = new class extends Error {
  name = "StaleReactionError";
  message = "The reaction that called `getAbortSignal()` was re-run or destroyed";
}();
function Dt() {
  throw new Error("https://svelte.dev/e/async_derived_orphan");
}
function Mt() {
  throw new Error("https://svelte.dev/e/effect_update_depth_exceeded");
}
function jt() {
  throw new Error("https://svelte.dev/e/state_descriptors_fixed");
}
function It() {
  throw new Error("https://svelte.dev/e/state_prototype_fixed");
}
function qt() {
  throw new Error("https://svelte.dev/e/state_unsafe_mutation");
}
function Lt() {
  throw new Error("https://svelte.dev/e/svelte_boundary_reset_onerror");
}
function Vt() {
  console.warn("https://svelte.dev/e/svelte_boundary_reset_noop");
}
function Xe(e) {
  return e === this.v;
}
let Ut = !1, N = null;
function fe(e) {
  N = e;
}
function Yt(e, t = !1, n) {
  N = {
    p: N,
    i: !1,
    c: null,
    e: null,
    s: e,
    x: null,
    l: null
  };
}
function Bt(e) {
  var t = (
    /** @type {ComponentContext} */
    N
  ), n = t.e;
  if (n !== null) {
    t.e = null;
    for (var i of n)
      on(i);
  }
  return t.i = !0, N = t.p, /** @type {T} */
  {};
}
function et() {
  return !0;
}
let se = [];
function Kt() {
  var e = se;
  se = [], Ct(e);
}
function Me(e) {
  if (se.length === 0) {
    var t = se;
    queueMicrotask(() => {
      t === se && Kt();
    });
  }
  se.push(e);
}
function tt(e) {
  var t = p;
  if (t === null)
    return v.f |= K, e;
  if ((t.f & Je) === 0) {
    if ((t.f & Pe) === 0)
      throw e;
    t.b.error(e);
  } else
    le(e, t);
}
function le(e, t) {
  for (; t !== null; ) {
    if ((t.f & Pe) !== 0)
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
const $t = -7169;
function m(e, t) {
  e.f = e.f & $t | t;
}
function je(e) {
  (e.f & A) !== 0 || e.deps === null ? m(e, b) : m(e, V);
}
function nt(e) {
  if (e !== null)
    for (const t of e)
      (t.f & y) === 0 || (t.f & ee) === 0 || (t.f ^= ee, nt(
        /** @type {Derived} */
        t.deps
      ));
}
function rt(e, t, n) {
  (e.f & T) !== 0 ? t.add(e) : (e.f & V) !== 0 && n.add(e), nt(e.deps), m(e, b);
}
const de = /* @__PURE__ */ new Set();
let g = null, R = null, C = [], Ie = null, Ne = !1;
class P {
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
  #t = /* @__PURE__ */ new Set();
  /**
   * If a fork is discarded, we need to destroy any effects that are no longer needed
   * @type {Set<(batch: Batch) => void>}
   */
  #_ = /* @__PURE__ */ new Set();
  /**
   * The number of async effects that are currently in flight
   */
  #r = 0;
  /**
   * The number of async effects that are currently in flight, _not_ inside a pending boundary
   */
  #f = 0;
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
  #n = /* @__PURE__ */ new Set();
  /**
   * Deferred effects that are MAYBE_DIRTY
   * @type {Set<Effect>}
   */
  #e = /* @__PURE__ */ new Set();
  /**
   * A set of branches that still exist, but will be destroyed when this batch
   * is committed — we skip over these during `process`
   * @type {Set<Effect>}
   */
  skipped_effects = /* @__PURE__ */ new Set();
  is_fork = !1;
  is_deferred() {
    return this.is_fork || this.#f > 0;
  }
  /**
   *
   * @param {Effect[]} root_effects
   */
  process(t) {
    C = [], this.apply();
    var n = [], i = [];
    for (const r of t)
      this.#s(r, n, i);
    this.is_fork || this.#u(), this.is_deferred() ? (this.#l(i), this.#l(n)) : (g = null, Be(i), Be(n), this.#i?.resolve()), R = null;
  }
  /**
   * Traverse the effect tree, executing effects or stashing
   * them for later execution as appropriate
   * @param {Effect} root
   * @param {Effect[]} effects
   * @param {Effect[]} render_effects
   */
  #s(t, n, i) {
    t.f ^= b;
    for (var r = t.first, s = null; r !== null; ) {
      var u = r.f, l = (u & (te | ne)) !== 0, f = l && (u & b) !== 0, a = f || (u & Y) !== 0 || this.skipped_effects.has(r);
      if (!a && r.fn !== null) {
        l ? r.f ^= b : s !== null && (u & (Re | xe | Ze)) !== 0 ? s.b.defer_effect(r) : (u & Re) !== 0 ? n.push(r) : ve(r) && ((u & L) !== 0 && this.#n.add(r), he(r));
        var o = r.first;
        if (o !== null) {
          r = o;
          continue;
        }
      }
      var h = r.parent;
      for (r = r.next; r === null && h !== null; )
        h === s && (s = null), r = h.next, h = h.parent;
    }
  }
  /**
   * @param {Effect[]} effects
   */
  #l(t) {
    for (var n = 0; n < t.length; n += 1)
      rt(t[n], this.#n, this.#e);
  }
  /**
   * Associate a change to a given source with the current
   * batch, noting its previous and current values
   * @param {Source} source
   * @param {any} value
   */
  capture(t, n) {
    n !== w && !this.previous.has(t) && this.previous.set(t, n), (t.f & K) === 0 && (this.current.set(t, t.v), R?.set(t, t.v));
  }
  activate() {
    g = this, this.apply();
  }
  deactivate() {
    g === this && (g = null, R = null);
  }
  flush() {
    if (this.activate(), C.length > 0) {
      if (zt(), g !== null && g !== this)
        return;
    } else this.#r === 0 && this.process([]);
    this.deactivate();
  }
  discard() {
    for (const t of this.#_) t(this);
    this.#_.clear();
  }
  #u() {
    if (this.#f === 0) {
      for (const t of this.#t) t();
      this.#t.clear();
    }
    this.#r === 0 && this.#a();
  }
  #a() {
    if (de.size > 1) {
      this.previous.clear();
      var t = R, n = !0;
      for (const r of de) {
        if (r === this) {
          n = !1;
          continue;
        }
        const s = [];
        for (const [l, f] of this.current) {
          if (r.current.has(l))
            if (n && f !== r.current.get(l))
              r.current.set(l, f);
            else
              continue;
          s.push(l);
        }
        if (s.length === 0)
          continue;
        const u = [...r.current.keys()].filter((l) => !this.current.has(l));
        if (u.length > 0) {
          var i = C;
          C = [];
          const l = /* @__PURE__ */ new Set(), f = /* @__PURE__ */ new Map();
          for (const a of s)
            it(a, u, l, f);
          if (C.length > 0) {
            g = r, r.apply();
            for (const a of C)
              r.#s(a, [], []);
            r.deactivate();
          }
          C = i;
        }
      }
      g = null, R = t;
    }
    this.committed = !0, de.delete(this);
  }
  /**
   *
   * @param {boolean} blocking
   */
  increment(t) {
    this.#r += 1, t && (this.#f += 1);
  }
  /**
   *
   * @param {boolean} blocking
   */
  decrement(t) {
    this.#r -= 1, t && (this.#f -= 1), this.revive();
  }
  revive() {
    for (const t of this.#n)
      this.#e.delete(t), m(t, T), z(t);
    for (const t of this.#e)
      m(t, V), z(t);
    this.flush();
  }
  /** @param {() => void} fn */
  oncommit(t) {
    this.#t.add(t);
  }
  /** @param {(batch: Batch) => void} fn */
  ondiscard(t) {
    this.#_.add(t);
  }
  settled() {
    return (this.#i ??= We()).promise;
  }
  static ensure() {
    if (g === null) {
      const t = g = new P();
      de.add(g), P.enqueue(() => {
        g === t && t.flush();
      });
    }
    return g;
  }
  /** @param {() => void} task */
  static enqueue(t) {
    Me(t);
  }
  apply() {
  }
}
function zt() {
  var e = Q;
  Ne = !0;
  var t = null;
  try {
    var n = 0;
    for (be(!0); C.length > 0; ) {
      var i = P.ensure();
      if (n++ > 1e3) {
        var r, s;
        Gt();
      }
      i.process(C), $.clear();
    }
  } finally {
    Ne = !1, be(e), Ie = null;
  }
}
function Gt() {
  try {
    Mt();
  } catch (e) {
    le(e, Ie);
  }
}
let I = null;
function Be(e) {
  var t = e.length;
  if (t !== 0) {
    for (var n = 0; n < t; ) {
      var i = e[n++];
      if ((i.f & (B | Y)) === 0 && ve(i) && (I = /* @__PURE__ */ new Set(), he(i), i.deps === null && i.first === null && i.nodes === null && (i.teardown === null && i.ac === null ? gt(i) : i.fn = null), I?.size > 0)) {
        $.clear();
        for (const r of I) {
          if ((r.f & (B | Y)) !== 0) continue;
          const s = [r];
          let u = r.parent;
          for (; u !== null; )
            I.has(u) && (I.delete(u), s.push(u)), u = u.parent;
          for (let l = s.length - 1; l >= 0; l--) {
            const f = s[l];
            (f.f & (B | Y)) === 0 && he(f);
          }
        }
        I.clear();
      }
    }
    I = null;
  }
}
function it(e, t, n, i) {
  if (!n.has(e) && (n.add(e), e.reactions !== null))
    for (const r of e.reactions) {
      const s = r.f;
      (s & y) !== 0 ? it(
        /** @type {Derived} */
        r,
        t,
        n,
        i
      ) : (s & (De | L)) !== 0 && (s & T) === 0 && st(r, t, i) && (m(r, T), z(
        /** @type {Effect} */
        r
      ));
    }
}
function st(e, t, n) {
  const i = n.get(e);
  if (i !== void 0) return i;
  if (e.deps !== null)
    for (const r of e.deps) {
      if (t.includes(r))
        return !0;
      if ((r.f & y) !== 0 && st(
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
function z(e) {
  for (var t = Ie = e; t.parent !== null; ) {
    t = t.parent;
    var n = t.f;
    if (Ne && t === p && (n & L) !== 0 && (n & Qe) === 0)
      return;
    if ((n & (ne | te)) !== 0) {
      if ((n & b) === 0) return;
      t.f ^= b;
    }
  }
  C.push(t);
}
function Ht(e) {
  let t = 0, n = Te(0), i;
  return () => {
    Le() && (J(n), hn(() => (t === 0 && (i = bn(() => e(() => _e(n)))), t += 1, () => {
      Me(() => {
        t -= 1, t === 0 && (i?.(), i = void 0, _e(n));
      });
    })));
  };
}
var Wt = we | ae | Pe;
function Zt(e, t, n) {
  new Jt(e, t, n);
}
class Jt {
  /** @type {Boundary | null} */
  parent;
  is_pending = !1;
  /** @type {TemplateNode} */
  #t;
  /** @type {TemplateNode | null} */
  #_ = null;
  /** @type {BoundaryProps} */
  #r;
  /** @type {((anchor: Node) => void)} */
  #f;
  /** @type {Effect} */
  #i;
  /** @type {Effect | null} */
  #n = null;
  /** @type {Effect | null} */
  #e = null;
  /** @type {Effect | null} */
  #s = null;
  /** @type {DocumentFragment | null} */
  #l = null;
  /** @type {TemplateNode | null} */
  #u = null;
  #a = 0;
  #o = 0;
  #h = !1;
  /** @type {Set<Effect>} */
  #v = /* @__PURE__ */ new Set();
  /** @type {Set<Effect>} */
  #d = /* @__PURE__ */ new Set();
  /**
   * A source containing the number of pending async deriveds/expressions.
   * Only created if `$effect.pending()` is used inside the boundary,
   * otherwise updating the source results in needless `Batch.ensure()`
   * calls followed by no-op flushes
   * @type {Source<number> | null}
   */
  #c = null;
  #m = Ht(() => (this.#c = Te(this.#a), () => {
    this.#c = null;
  }));
  /**
   * @param {TemplateNode} node
   * @param {BoundaryProps} props
   * @param {((anchor: Node) => void)} children
   */
  constructor(t, n, i) {
    this.#t = t, this.#r = n, this.#f = i, this.parent = /** @type {Effect} */
    p.b, this.is_pending = !!this.#r.pending, this.#i = vn(() => {
      p.b = this;
      {
        var r = this.#w();
        try {
          this.#n = H(() => i(r));
        } catch (s) {
          this.error(s);
        }
        this.#o > 0 ? this.#g() : this.is_pending = !1;
      }
      return () => {
        this.#u?.remove();
      };
    }, Wt);
  }
  #b() {
    try {
      this.#n = H(() => this.#f(this.#t));
    } catch (t) {
      this.error(t);
    }
  }
  #E() {
    const t = this.#r.pending;
    t && (this.#e = H(() => t(this.#t)), P.enqueue(() => {
      var n = this.#w();
      this.#n = this.#p(() => (P.ensure(), H(() => this.#f(n)))), this.#o > 0 ? this.#g() : (ge(
        /** @type {Effect} */
        this.#e,
        () => {
          this.#e = null;
        }
      ), this.is_pending = !1);
    }));
  }
  #w() {
    var t = this.#t;
    return this.is_pending && (this.#u = _t(), this.#t.before(this.#u), t = this.#u), t;
  }
  /**
   * Defer an effect inside a pending boundary until the boundary resolves
   * @param {Effect} effect
   */
  defer_effect(t) {
    rt(t, this.#v, this.#d);
  }
  /**
   * Returns `false` if the effect exists inside a boundary whose pending snippet is shown
   * @returns {boolean}
   */
  is_rendered() {
    return !this.is_pending && (!this.parent || this.parent.is_rendered());
  }
  has_pending_snippet() {
    return !!this.#r.pending;
  }
  /**
   * @param {() => Effect | null} fn
   */
  #p(t) {
    var n = p, i = v, r = N;
    M(this.#i), x(this.#i), fe(this.#i.ctx);
    try {
      return t();
    } catch (s) {
      return tt(s), null;
    } finally {
      M(n), x(i), fe(r);
    }
  }
  #g() {
    const t = (
      /** @type {(anchor: Node) => void} */
      this.#r.pending
    );
    this.#n !== null && (this.#l = document.createDocumentFragment(), this.#l.append(
      /** @type {TemplateNode} */
      this.#u
    ), gn(this.#n, this.#l)), this.#e === null && (this.#e = H(() => t(this.#t)));
  }
  /**
   * Updates the pending count associated with the currently visible pending snippet,
   * if any, such that we can replace the snippet with content once work is done
   * @param {1 | -1} d
   */
  #y(t) {
    if (!this.has_pending_snippet()) {
      this.parent && this.parent.#y(t);
      return;
    }
    if (this.#o += t, this.#o === 0) {
      this.is_pending = !1;
      for (const n of this.#v)
        m(n, T), z(n);
      for (const n of this.#d)
        m(n, V), z(n);
      this.#v.clear(), this.#d.clear(), this.#e && ge(this.#e, () => {
        this.#e = null;
      }), this.#l && (this.#t.before(this.#l), this.#l = null);
    }
  }
  /**
   * Update the source that powers `$effect.pending()` inside this boundary,
   * and controls when the current `pending` snippet (if any) is removed.
   * Do not call from inside the class
   * @param {1 | -1} d
   */
  update_pending_count(t) {
    this.#y(t), this.#a += t, this.#c && me(this.#c, this.#a);
  }
  get_effect_pending() {
    return this.#m(), J(
      /** @type {Source<number>} */
      this.#c
    );
  }
  /** @param {unknown} error */
  error(t) {
    var n = this.#r.onerror;
    let i = this.#r.failed;
    if (this.#h || !n && !i)
      throw t;
    this.#n && (D(this.#n), this.#n = null), this.#e && (D(this.#e), this.#e = null), this.#s && (D(this.#s), this.#s = null);
    var r = !1, s = !1;
    const u = () => {
      if (r) {
        Vt();
        return;
      }
      r = !0, s && Lt(), P.ensure(), this.#a = 0, this.#s !== null && ge(this.#s, () => {
        this.#s = null;
      }), this.is_pending = this.has_pending_snippet(), this.#n = this.#p(() => (this.#h = !1, H(() => this.#f(this.#t)))), this.#o > 0 ? this.#g() : this.is_pending = !1;
    };
    var l = v;
    try {
      x(null), s = !0, n?.(t, u), s = !1;
    } catch (f) {
      le(f, this.#i && this.#i.parent);
    } finally {
      x(l);
    }
    i && Me(() => {
      this.#s = this.#p(() => {
        P.ensure(), this.#h = !0;
        try {
          return H(() => {
            i(
              this.#t,
              () => t,
              () => u
            );
          });
        } catch (f) {
          return le(
            f,
            /** @type {Effect} */
            this.#i.parent
          ), null;
        } finally {
          this.#h = !1;
        }
      });
    });
  }
}
function Qt(e, t, n, i) {
  const r = en;
  if (n.length === 0 && e.length === 0) {
    i(t.map(r));
    return;
  }
  var s = g, u = (
    /** @type {Effect} */
    p
  ), l = Xt();
  function f() {
    Promise.all(n.map((a) => /* @__PURE__ */ tn(a))).then((a) => {
      l();
      try {
        i([...t.map(r), ...a]);
      } catch (o) {
        (u.f & B) === 0 && le(o, u);
      }
      s?.deactivate(), ye();
    }).catch((a) => {
      le(a, u);
    });
  }
  e.length > 0 ? Promise.all(e).then(() => {
    l();
    try {
      return f();
    } finally {
      s?.deactivate(), ye();
    }
  }) : f();
}
function Xt() {
  var e = p, t = v, n = N, i = g;
  return function(s = !0) {
    M(e), x(t), fe(n), s && i?.activate();
  };
}
function ye() {
  M(null), x(null), fe(null);
}
// @__NO_SIDE_EFFECTS__
function en(e) {
  var t = y | T, n = v !== null && (v.f & y) !== 0 ? (
    /** @type {Derived} */
    v
  ) : null;
  return p !== null && (p.f |= ae), {
    ctx: N,
    deps: null,
    effects: null,
    equals: Xe,
    f: t,
    fn: e,
    reactions: null,
    rv: 0,
    v: (
      /** @type {V} */
      w
    ),
    wv: 0,
    parent: n ?? p,
    ac: null
  };
}
// @__NO_SIDE_EFFECTS__
function tn(e, t, n) {
  let i = (
    /** @type {Effect | null} */
    p
  );
  i === null && Dt();
  var r = (
    /** @type {Boundary} */
    i.b
  ), s = (
    /** @type {Promise<V>} */
    /** @type {unknown} */
    void 0
  ), u = Te(
    /** @type {V} */
    w
  ), l = !v, f = /* @__PURE__ */ new Map();
  return _n(() => {
    var a = We();
    s = a.promise;
    try {
      Promise.resolve(e()).then(a.resolve, a.reject).then(() => {
        o === g && o.committed && o.deactivate(), ye();
      });
    } catch (_) {
      a.reject(_), ye();
    }
    var o = (
      /** @type {Batch} */
      g
    );
    if (l) {
      var h = r.is_rendered();
      r.update_pending_count(1), o.increment(h), f.get(o)?.reject(ie), f.delete(o), f.set(o, a);
    }
    const c = (_, d = void 0) => {
      if (o.activate(), d)
        d !== ie && (u.f |= K, me(u, d));
      else {
        (u.f & K) !== 0 && (u.f ^= K), me(u, _);
        for (const [O, j] of f) {
          if (f.delete(O), O === o) break;
          j.reject(ie);
        }
      }
      l && (r.update_pending_count(-1), o.decrement(h));
    };
    a.promise.then(c, (_) => c(null, _ || "unknown"));
  }), an(() => {
    for (const a of f.values())
      a.reject(ie);
  }), new Promise((a) => {
    function o(h) {
      function c() {
        h === s ? a(u) : o(s);
      }
      h.then(c, c);
    }
    o(s);
  });
}
function ft(e) {
  var t = e.effects;
  if (t !== null) {
    e.effects = null;
    for (var n = 0; n < t.length; n += 1)
      D(
        /** @type {Effect} */
        t[n]
      );
  }
}
function nn(e) {
  for (var t = e.parent; t !== null; ) {
    if ((t.f & y) === 0)
      return (t.f & B) === 0 ? (
        /** @type {Effect} */
        t
      ) : null;
    t = t.parent;
  }
  return null;
}
function qe(e) {
  var t, n = p;
  M(nn(e));
  try {
    e.f &= ~ee, ft(e), t = Et(e);
  } finally {
    M(n);
  }
  return t;
}
function lt(e) {
  var t = qe(e);
  if (!e.equals(t) && (e.wv = mt(), (!g?.is_fork || e.deps === null) && (e.v = t, e.deps === null))) {
    m(e, b);
    return;
  }
  ue || (R !== null ? (Le() || g?.is_fork) && R.set(e, t) : je(e));
}
let Oe = /* @__PURE__ */ new Set();
const $ = /* @__PURE__ */ new Map();
let ut = !1;
function Te(e, t) {
  var n = {
    f: 0,
    // TODO ideally we could skip this altogether, but it causes type errors
    v: e,
    reactions: null,
    equals: Xe,
    rv: 0,
    wv: 0
  };
  return n;
}
// @__NO_SIDE_EFFECTS__
function U(e, t) {
  const n = Te(e);
  return wn(n), n;
}
function W(e, t, n = !1) {
  v !== null && // since we are untracking the function inside `$inspect.with` we need to add this check
  // to ensure we error if state is set inside an inspect effect
  (!F || (v.f & Ye) !== 0) && et() && (v.f & (y | L | De | Ye)) !== 0 && !q?.includes(e) && qt();
  let i = n ? oe(t) : t;
  return me(e, i);
}
function me(e, t) {
  if (!e.equals(t)) {
    var n = e.v;
    ue ? $.set(e, t) : $.set(e, n), e.v = t;
    var i = P.ensure();
    if (i.capture(e, n), (e.f & y) !== 0) {
      const r = (
        /** @type {Derived} */
        e
      );
      (e.f & T) !== 0 && qe(r), je(r);
    }
    e.wv = mt(), at(e, T), p !== null && (p.f & b) !== 0 && (p.f & (te | ne)) === 0 && (k === null ? yn([e]) : k.push(e)), !i.is_fork && Oe.size > 0 && !ut && rn();
  }
  return t;
}
function rn() {
  ut = !1;
  var e = Q;
  be(!0);
  const t = Array.from(Oe);
  try {
    for (const n of t)
      (n.f & b) !== 0 && m(n, V), ve(n) && he(n);
  } finally {
    be(e);
  }
  Oe.clear();
}
function _e(e) {
  W(e, e.v + 1);
}
function at(e, t) {
  var n = e.reactions;
  if (n !== null)
    for (var i = n.length, r = 0; r < i; r++) {
      var s = n[r], u = s.f, l = (u & T) === 0;
      if (l && m(s, t), (u & y) !== 0) {
        var f = (
          /** @type {Derived} */
          s
        );
        R?.delete(f), (u & ee) === 0 && (u & A && (s.f |= ee), at(f, V));
      } else l && ((u & L) !== 0 && I !== null && I.add(
        /** @type {Effect} */
        s
      ), z(
        /** @type {Effect} */
        s
      ));
    }
}
function oe(e) {
  if (typeof e != "object" || e === null || ke in e)
    return e;
  const t = Ot(e);
  if (t !== Ft && t !== Nt)
    return e;
  var n = /* @__PURE__ */ new Map(), i = St(e), r = /* @__PURE__ */ U(0), s = X, u = (l) => {
    if (X === s)
      return l();
    var f = v, a = X;
    x(null), ze(s);
    var o = l();
    return x(f), ze(a), o;
  };
  return i && n.set("length", /* @__PURE__ */ U(
    /** @type {any[]} */
    e.length
  )), new Proxy(
    /** @type {any} */
    e,
    {
      defineProperty(l, f, a) {
        (!("value" in a) || a.configurable === !1 || a.enumerable === !1 || a.writable === !1) && jt();
        var o = n.get(f);
        return o === void 0 ? o = u(() => {
          var h = /* @__PURE__ */ U(a.value);
          return n.set(f, h), h;
        }) : W(o, a.value, !0), !0;
      },
      deleteProperty(l, f) {
        var a = n.get(f);
        if (a === void 0) {
          if (f in l) {
            const o = u(() => /* @__PURE__ */ U(w));
            n.set(f, o), _e(r);
          }
        } else
          W(a, w), _e(r);
        return !0;
      },
      get(l, f, a) {
        if (f === ke)
          return e;
        var o = n.get(f), h = f in l;
        if (o === void 0 && (!h || ce(l, f)?.writable) && (o = u(() => {
          var _ = oe(h ? l[f] : w), d = /* @__PURE__ */ U(_);
          return d;
        }), n.set(f, o)), o !== void 0) {
          var c = J(o);
          return c === w ? void 0 : c;
        }
        return Reflect.get(l, f, a);
      },
      getOwnPropertyDescriptor(l, f) {
        var a = Reflect.getOwnPropertyDescriptor(l, f);
        if (a && "value" in a) {
          var o = n.get(f);
          o && (a.value = J(o));
        } else if (a === void 0) {
          var h = n.get(f), c = h?.v;
          if (h !== void 0 && c !== w)
            return {
              enumerable: !0,
              configurable: !0,
              value: c,
              writable: !0
            };
        }
        return a;
      },
      has(l, f) {
        if (f === ke)
          return !0;
        var a = n.get(f), o = a !== void 0 && a.v !== w || Reflect.has(l, f);
        if (a !== void 0 || p !== null && (!o || ce(l, f)?.writable)) {
          a === void 0 && (a = u(() => {
            var c = o ? oe(l[f]) : w, _ = /* @__PURE__ */ U(c);
            return _;
          }), n.set(f, a));
          var h = J(a);
          if (h === w)
            return !1;
        }
        return o;
      },
      set(l, f, a, o) {
        var h = n.get(f), c = f in l;
        if (i && f === "length")
          for (var _ = a; _ < /** @type {Source<number>} */
          h.v; _ += 1) {
            var d = n.get(_ + "");
            d !== void 0 ? W(d, w) : _ in l && (d = u(() => /* @__PURE__ */ U(w)), n.set(_ + "", d));
          }
        if (h === void 0)
          (!c || ce(l, f)?.writable) && (h = u(() => /* @__PURE__ */ U(void 0)), W(h, oe(a)), n.set(f, h));
        else {
          c = h.v !== w;
          var O = u(() => oe(a));
          W(h, O);
        }
        var j = Reflect.getOwnPropertyDescriptor(l, f);
        if (j?.set && j.set.call(o, a), !c) {
          if (i && typeof f == "string") {
            var Ve = (
              /** @type {Source<number>} */
              n.get("length")
            ), Se = Number(f);
            Number.isInteger(Se) && Se >= Ve.v && W(Ve, Se + 1);
          }
          _e(r);
        }
        return !0;
      },
      ownKeys(l) {
        J(r);
        var f = Reflect.ownKeys(l).filter((h) => {
          var c = n.get(h);
          return c === void 0 || c.v !== w;
        });
        for (var [a, o] of n)
          o.v !== w && !(a in l) && f.push(a);
        return f;
      },
      setPrototypeOf() {
        It();
      }
    }
  );
}
var Ke, sn, ot, ct;
function fn() {
  if (Ke === void 0) {
    Ke = window, sn = /Firefox/.test(navigator.userAgent);
    var e = Element.prototype, t = Node.prototype, n = Text.prototype;
    ot = ce(t, "firstChild").get, ct = ce(t, "nextSibling").get, Ue(e) && (e.__click = void 0, e.__className = void 0, e.__attributes = null, e.__style = void 0, e.__e = void 0), Ue(n) && (n.__t = void 0);
  }
}
function _t(e = "") {
  return document.createTextNode(e);
}
// @__NO_SIDE_EFFECTS__
function ln(e) {
  return (
    /** @type {TemplateNode | null} */
    ot.call(e)
  );
}
// @__NO_SIDE_EFFECTS__
function ht(e) {
  return (
    /** @type {TemplateNode | null} */
    ct.call(e)
  );
}
function Rn(e, t) {
  return /* @__PURE__ */ ln(e);
}
function vt(e) {
  var t = v, n = p;
  x(null), M(null);
  try {
    return e();
  } finally {
    x(t), M(n);
  }
}
function un(e, t) {
  var n = t.last;
  n === null ? t.last = t.first = e : (n.next = e, e.prev = n, t.last = e);
}
function G(e, t, n) {
  var i = p;
  i !== null && (i.f & Y) !== 0 && (e |= Y);
  var r = {
    ctx: N,
    deps: null,
    nodes: null,
    f: e | T | A,
    first: null,
    fn: t,
    last: null,
    next: null,
    parent: i,
    b: i && i.b,
    prev: null,
    teardown: null,
    wv: 0,
    ac: null
  };
  if (n)
    try {
      he(r), r.f |= Je;
    } catch (l) {
      throw D(r), l;
    }
  else t !== null && z(r);
  var s = r;
  if (n && s.deps === null && s.teardown === null && s.nodes === null && s.first === s.last && // either `null`, or a singular child
  (s.f & ae) === 0 && (s = s.first, (e & L) !== 0 && (e & we) !== 0 && s !== null && (s.f |= we)), s !== null && (s.parent = i, i !== null && un(s, i), v !== null && (v.f & y) !== 0 && (e & ne) === 0)) {
    var u = (
      /** @type {Derived} */
      v
    );
    (u.effects ??= []).push(s);
  }
  return r;
}
function Le() {
  return v !== null && !F;
}
function an(e) {
  const t = G(xe, null, !1);
  return m(t, b), t.teardown = e, t;
}
function on(e) {
  return G(Re | Pt, e, !1);
}
function cn(e) {
  P.ensure();
  const t = G(ne | ae, e, !0);
  return (n = {}) => new Promise((i) => {
    n.outro ? ge(t, () => {
      D(t), i(void 0);
    }) : (D(t), i(void 0));
  });
}
function _n(e) {
  return G(De | ae, e, !0);
}
function hn(e, t = 0) {
  return G(xe | t, e, !0);
}
function Fn(e, t = [], n = [], i = []) {
  Qt(i, t, n, (r) => {
    G(xe, () => e(...r.map(J)), !0);
  });
}
function vn(e, t = 0) {
  var n = G(L | t, e, !0);
  return n;
}
function H(e) {
  return G(te | ae, e, !0);
}
function dt(e) {
  var t = e.teardown;
  if (t !== null) {
    const n = ue, i = v;
    $e(!0), x(null);
    try {
      t.call(null);
    } finally {
      $e(n), x(i);
    }
  }
}
function pt(e, t = !1) {
  var n = e.first;
  for (e.first = e.last = null; n !== null; ) {
    const r = n.ac;
    r !== null && vt(() => {
      r.abort(ie);
    });
    var i = n.next;
    (n.f & ne) !== 0 ? n.parent = null : D(n, t), n = i;
  }
}
function dn(e) {
  for (var t = e.first; t !== null; ) {
    var n = t.next;
    (t.f & te) === 0 && D(t), t = n;
  }
}
function D(e, t = !0) {
  var n = !1;
  (t || (e.f & Qe) !== 0) && e.nodes !== null && e.nodes.end !== null && (pn(
    e.nodes.start,
    /** @type {TemplateNode} */
    e.nodes.end
  ), n = !0), pt(e, t && !n), Ee(e, 0), m(e, B);
  var i = e.nodes && e.nodes.t;
  if (i !== null)
    for (const s of i)
      s.stop();
  dt(e);
  var r = e.parent;
  r !== null && r.first !== null && gt(e), e.next = e.prev = e.teardown = e.ctx = e.deps = e.fn = e.nodes = e.ac = null;
}
function pn(e, t) {
  for (; e !== null; ) {
    var n = e === t ? null : /* @__PURE__ */ ht(e);
    e.remove(), e = n;
  }
}
function gt(e) {
  var t = e.parent, n = e.prev, i = e.next;
  n !== null && (n.next = i), i !== null && (i.prev = n), t !== null && (t.first === e && (t.first = i), t.last === e && (t.last = n));
}
function ge(e, t, n = !0) {
  var i = [];
  wt(e, i, !0);
  var r = () => {
    n && D(e), t && t();
  }, s = i.length;
  if (s > 0) {
    var u = () => --s || r();
    for (var l of i)
      l.out(u);
  } else
    r();
}
function wt(e, t, n) {
  if ((e.f & Y) === 0) {
    e.f ^= Y;
    var i = e.nodes && e.nodes.t;
    if (i !== null)
      for (const l of i)
        (l.is_global || n) && t.push(l);
    for (var r = e.first; r !== null; ) {
      var s = r.next, u = (r.f & we) !== 0 || // If this is a branch effect without a block effect parent,
      // it means the parent block effect was pruned. In that case,
      // transparency information was transferred to the branch effect.
      (r.f & te) !== 0 && (e.f & L) !== 0;
      wt(r, t, u ? n : !1), r = s;
    }
  }
}
function gn(e, t) {
  if (e.nodes)
    for (var n = e.nodes.start, i = e.nodes.end; n !== null; ) {
      var r = n === i ? null : /* @__PURE__ */ ht(n);
      t.append(n), n = r;
    }
}
let Q = !1;
function be(e) {
  Q = e;
}
let ue = !1;
function $e(e) {
  ue = e;
}
let v = null, F = !1;
function x(e) {
  v = e;
}
let p = null;
function M(e) {
  p = e;
}
let q = null;
function wn(e) {
  v !== null && (q === null ? q = [e] : q.push(e));
}
let E = null, S = 0, k = null;
function yn(e) {
  k = e;
}
let yt = 1, Z = 0, X = Z;
function ze(e) {
  X = e;
}
function mt() {
  return ++yt;
}
function ve(e) {
  var t = e.f;
  if ((t & T) !== 0)
    return !0;
  if (t & y && (e.f &= ~ee), (t & V) !== 0) {
    for (var n = (
      /** @type {Value[]} */
      e.deps
    ), i = n.length, r = 0; r < i; r++) {
      var s = n[r];
      if (ve(
        /** @type {Derived} */
        s
      ) && lt(
        /** @type {Derived} */
        s
      ), s.wv > e.wv)
        return !0;
    }
    (t & A) !== 0 && // During time traveling we don't want to reset the status so that
    // traversal of the graph in the other batches still happens
    R === null && m(e, b);
  }
  return !1;
}
function bt(e, t, n = !0) {
  var i = e.reactions;
  if (i !== null && !q?.includes(e))
    for (var r = 0; r < i.length; r++) {
      var s = i[r];
      (s.f & y) !== 0 ? bt(
        /** @type {Derived} */
        s,
        t,
        !1
      ) : t === s && (n ? m(s, T) : (s.f & b) !== 0 && m(s, V), z(
        /** @type {Effect} */
        s
      ));
    }
}
function Et(e) {
  var t = E, n = S, i = k, r = v, s = q, u = N, l = F, f = X, a = e.f;
  E = /** @type {null | Value[]} */
  null, S = 0, k = null, v = (a & (te | ne)) === 0 ? e : null, q = null, fe(e.ctx), F = !1, X = ++Z, e.ac !== null && (vt(() => {
    e.ac.abort(ie);
  }), e.ac = null);
  try {
    e.f |= Fe;
    var o = (
      /** @type {Function} */
      e.fn
    ), h = o(), c = e.deps;
    if (E !== null) {
      var _;
      if (Ee(e, S), c !== null && S > 0)
        for (c.length = S + E.length, _ = 0; _ < E.length; _++)
          c[S + _] = E[_];
      else
        e.deps = c = E;
      if (Le() && (e.f & A) !== 0)
        for (_ = S; _ < c.length; _++)
          (c[_].reactions ??= []).push(e);
    } else c !== null && S < c.length && (Ee(e, S), c.length = S);
    if (et() && k !== null && !F && c !== null && (e.f & (y | V | T)) === 0)
      for (_ = 0; _ < /** @type {Source[]} */
      k.length; _++)
        bt(
          k[_],
          /** @type {Effect} */
          e
        );
    if (r !== null && r !== e) {
      if (Z++, r.deps !== null)
        for (let d = 0; d < n; d += 1)
          r.deps[d].rv = Z;
      if (t !== null)
        for (const d of t)
          d.rv = Z;
      k !== null && (i === null ? i = k : i.push(.../** @type {Source[]} */
      k));
    }
    return (e.f & K) !== 0 && (e.f ^= K), h;
  } catch (d) {
    return tt(d);
  } finally {
    e.f ^= Fe, E = t, S = n, k = i, v = r, q = s, fe(u), F = l, X = f;
  }
}
function mn(e, t) {
  let n = t.reactions;
  if (n !== null) {
    var i = kt.call(n, e);
    if (i !== -1) {
      var r = n.length - 1;
      r === 0 ? n = t.reactions = null : (n[i] = n[r], n.pop());
    }
  }
  if (n === null && (t.f & y) !== 0 && // Destroying a child effect while updating a parent effect can cause a dependency to appear
  // to be unused, when in fact it is used by the currently-updating parent. Checking `new_deps`
  // allows us to skip the expensive work of disconnecting and immediately reconnecting it
  (E === null || !E.includes(t))) {
    var s = (
      /** @type {Derived} */
      t
    );
    (s.f & A) !== 0 && (s.f ^= A, s.f &= ~ee), je(s), ft(s), Ee(s, 0);
  }
}
function Ee(e, t) {
  var n = e.deps;
  if (n !== null)
    for (var i = t; i < n.length; i++)
      mn(e, n[i]);
}
function he(e) {
  var t = e.f;
  if ((t & B) === 0) {
    m(e, b);
    var n = p, i = Q;
    p = e, Q = !0;
    try {
      (t & (L | Ze)) !== 0 ? dn(e) : pt(e), dt(e);
      var r = Et(e);
      e.teardown = typeof r == "function" ? r : null, e.wv = yt;
      var s;
      Ae && Ut && (e.f & T) !== 0 && e.deps;
    } finally {
      Q = i, p = n;
    }
  }
}
function J(e) {
  var t = e.f, n = (t & y) !== 0;
  if (v !== null && !F) {
    var i = p !== null && (p.f & B) !== 0;
    if (!i && !q?.includes(e)) {
      var r = v.deps;
      if ((v.f & Fe) !== 0)
        e.rv < Z && (e.rv = Z, E === null && r !== null && r[S] === e ? S++ : E === null ? E = [e] : E.push(e));
      else {
        (v.deps ??= []).push(e);
        var s = e.reactions;
        s === null ? e.reactions = [v] : s.includes(v) || s.push(v);
      }
    }
  }
  if (ue && $.has(e))
    return $.get(e);
  if (n) {
    var u = (
      /** @type {Derived} */
      e
    );
    if (ue) {
      var l = u.v;
      return ((u.f & b) === 0 && u.reactions !== null || Tt(u)) && (l = qe(u)), $.set(u, l), l;
    }
    var f = (u.f & A) === 0 && !F && v !== null && (Q || (v.f & A) !== 0), a = u.deps === null;
    ve(u) && (f && (u.f |= A), lt(u)), f && !a && xt(u);
  }
  if (R?.has(e))
    return R.get(e);
  if ((e.f & K) !== 0)
    throw e.v;
  return e.v;
}
function xt(e) {
  if (e.deps !== null) {
    e.f |= A;
    for (const t of e.deps)
      (t.reactions ??= []).push(e), (t.f & y) !== 0 && (t.f & A) === 0 && xt(
        /** @type {Derived} */
        t
      );
  }
}
function Tt(e) {
  if (e.v === w) return !0;
  if (e.deps === null) return !1;
  for (const t of e.deps)
    if ($.has(t) || (t.f & y) !== 0 && Tt(
      /** @type {Derived} */
      t
    ))
      return !0;
  return !1;
}
function bn(e) {
  var t = F;
  try {
    return F = !0, e();
  } finally {
    F = t;
  }
}
const En = /* @__PURE__ */ new Set(), Ge = /* @__PURE__ */ new Set();
let He = null;
function pe(e) {
  var t = this, n = (
    /** @type {Node} */
    t.ownerDocument
  ), i = e.type, r = e.composedPath?.() || [], s = (
    /** @type {null | Element} */
    r[0] || e.target
  );
  He = e;
  var u = 0, l = He === e && e.__root;
  if (l) {
    var f = r.indexOf(l);
    if (f !== -1 && (t === document || t === /** @type {any} */
    window)) {
      e.__root = t;
      return;
    }
    var a = r.indexOf(t);
    if (a === -1)
      return;
    f <= a && (u = f);
  }
  if (s = /** @type {Element} */
  r[u] || e.target, s !== t) {
    Rt(e, "currentTarget", {
      configurable: !0,
      get() {
        return s || n;
      }
    });
    var o = v, h = p;
    x(null), M(null);
    try {
      for (var c, _ = []; s !== null; ) {
        var d = s.assignedSlot || s.parentNode || /** @type {any} */
        s.host || null;
        try {
          var O = s["__" + i];
          O != null && (!/** @type {any} */
          s.disabled || // DOM could've been updated already by the time this is reached, so we check this as well
          // -> the target could not have been disabled because it emits the event in the first place
          e.target === s) && O.call(s, e);
        } catch (j) {
          c ? _.push(j) : c = j;
        }
        if (e.cancelBubble || d === t || d === null)
          break;
        s = d;
      }
      if (c) {
        for (let j of _)
          queueMicrotask(() => {
            throw j;
          });
        throw c;
      }
    } finally {
      e.__root = t, delete e.currentTarget, x(o), M(h);
    }
  }
}
const xn = ["touchstart", "touchmove"];
function Tn(e) {
  return xn.includes(e);
}
function Nn(e, t) {
  var n = t == null ? "" : typeof t == "object" ? t + "" : t;
  n !== (e.__t ??= e.nodeValue) && (e.__t = n, e.nodeValue = n + "");
}
function On(e, t) {
  return Sn(e, t);
}
const re = /* @__PURE__ */ new Map();
function Sn(e, { target: t, anchor: n, props: i = {}, events: r, context: s, intro: u = !0 }) {
  fn();
  var l = /* @__PURE__ */ new Set(), f = (h) => {
    for (var c = 0; c < h.length; c++) {
      var _ = h[c];
      if (!l.has(_)) {
        l.add(_);
        var d = Tn(_);
        t.addEventListener(_, pe, { passive: d });
        var O = re.get(_);
        O === void 0 ? (document.addEventListener(_, pe, { passive: d }), re.set(_, 1)) : re.set(_, O + 1);
      }
    }
  };
  f(At(En)), Ge.add(f);
  var a = void 0, o = cn(() => {
    var h = n ?? t.appendChild(_t());
    return Zt(
      /** @type {TemplateNode} */
      h,
      {
        pending: () => {
        }
      },
      (c) => {
        if (s) {
          Yt({});
          var _ = (
            /** @type {ComponentContext} */
            N
          );
          _.c = s;
        }
        r && (i.$$events = r), a = e(c, i) || {}, s && Bt();
      }
    ), () => {
      for (var c of l) {
        t.removeEventListener(c, pe);
        var _ = (
          /** @type {number} */
          re.get(c)
        );
        --_ === 0 ? (document.removeEventListener(c, pe), re.delete(c)) : re.set(c, _);
      }
      Ge.delete(f), h !== n && h.parentNode?.removeChild(h);
    };
  });
  return Ce.set(a, o), a;
}
let Ce = /* @__PURE__ */ new WeakMap();
function Cn(e, t) {
  const n = Ce.get(e);
  return n ? (Ce.delete(e), n(t)) : Promise.resolve();
}
export {
  kn as T,
  p as a,
  Yt as b,
  Rn as c,
  ln as g,
  sn as i,
  On as m,
  Bt as p,
  Nn as s,
  Fn as t,
  Cn as u
};
