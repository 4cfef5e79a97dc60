import { y as L, a as E, j as M, h as u, M as b, p as T, c as D, O as A, P as w, Q as g, R as O, U as Y, m as q, V as P, W as x, X as V, Y as j, Z as U, B as $, f as R, _ as k, q as W, $ as I, a0 as z, E as H, a1 as Q, a2 as X, a3 as F, a4 as Z, a5 as G, a6 as J, a7 as K, a8 as ee, F as te, H as se } from "./runtime-BaIEpYVf.js";
function ie() {
  console.warn("https://svelte.dev/e/svelte_boundary_reset_noop");
}
var ne = H | Q | X;
function re(t, e, s) {
  new ae(t, e, s);
}
class ae {
  /** @type {Boundary | null} */
  parent;
  is_pending = !1;
  /** @type {TemplateNode} */
  #t;
  /** @type {TemplateNode | null} */
  #m = null;
  /** @type {BoundaryProps} */
  #i;
  /** @type {((anchor: Node) => void)} */
  #f;
  /** @type {Effect} */
  #n;
  /** @type {Effect | null} */
  #s = null;
  /** @type {Effect | null} */
  #e = null;
  /** @type {Effect | null} */
  #r = null;
  /** @type {DocumentFragment | null} */
  #a = null;
  /** @type {TemplateNode | null} */
  #o = null;
  #u = 0;
  #h = 0;
  #c = !1;
  /** @type {Set<Effect>} */
  #_ = /* @__PURE__ */ new Set();
  /** @type {Set<Effect>} */
  #d = /* @__PURE__ */ new Set();
  /**
   * A source containing the number of pending async deriveds/expressions.
   * Only created if `$effect.pending()` is used inside the boundary,
   * otherwise updating the source results in needless `Batch.ensure()`
   * calls followed by no-op flushes
   * @type {Source<number> | null}
   */
  #l = null;
  #b = L(() => (this.#l = Z(this.#u), () => {
    this.#l = null;
  }));
  /**
   * @param {TemplateNode} node
   * @param {BoundaryProps} props
   * @param {((anchor: Node) => void)} children
   */
  constructor(e, s, o) {
    this.#t = e, this.#i = s, this.#f = o, this.parent = /** @type {Effect} */
    E.b, this.is_pending = !!this.#i.pending, this.#n = M(() => {
      E.b = this;
      {
        var a = this.#v();
        try {
          this.#s = u(() => o(a));
        } catch (i) {
          this.error(i);
        }
        this.#h > 0 ? this.#g() : this.is_pending = !1;
      }
      return () => {
        this.#o?.remove();
      };
    }, ne);
  }
  #E() {
    try {
      this.#s = u(() => this.#f(this.#t));
    } catch (e) {
      this.error(e);
    }
  }
  #w() {
    const e = this.#i.pending;
    e && (this.#e = u(() => e(this.#t)), b.enqueue(() => {
      var s = this.#v();
      this.#s = this.#p(() => (b.ensure(), u(() => this.#f(s)))), this.#h > 0 ? this.#g() : (T(
        /** @type {Effect} */
        this.#e,
        () => {
          this.#e = null;
        }
      ), this.is_pending = !1);
    }));
  }
  #v() {
    var e = this.#t;
    return this.is_pending && (this.#o = D(), this.#t.before(this.#o), e = this.#o), e;
  }
  /**
   * Defer an effect inside a pending boundary until the boundary resolves
   * @param {Effect} effect
   */
  defer_effect(e) {
    A(e, this.#_, this.#d);
  }
  /**
   * Returns `false` if the effect exists inside a boundary whose pending snippet is shown
   * @returns {boolean}
   */
  is_rendered() {
    return !this.is_pending && (!this.parent || this.parent.is_rendered());
  }
  has_pending_snippet() {
    return !!this.#i.pending;
  }
  /**
   * @param {() => Effect | null} fn
   */
  #p(e) {
    var s = E, o = F, a = I;
    w(this.#n), g(this.#n), O(this.#n.ctx);
    try {
      return e();
    } catch (i) {
      return Y(i), null;
    } finally {
      w(s), g(o), O(a);
    }
  }
  #g() {
    const e = (
      /** @type {(anchor: Node) => void} */
      this.#i.pending
    );
    this.#s !== null && (this.#a = document.createDocumentFragment(), this.#a.append(
      /** @type {TemplateNode} */
      this.#o
    ), q(this.#s, this.#a)), this.#e === null && (this.#e = u(() => e(this.#t)));
  }
  /**
   * Updates the pending count associated with the currently visible pending snippet,
   * if any, such that we can replace the snippet with content once work is done
   * @param {1 | -1} d
   */
  #y(e) {
    if (!this.has_pending_snippet()) {
      this.parent && this.parent.#y(e);
      return;
    }
    if (this.#h += e, this.#h === 0) {
      this.is_pending = !1;
      for (const s of this.#_)
        P(s, x), V(s);
      for (const s of this.#d)
        P(s, j), V(s);
      this.#_.clear(), this.#d.clear(), this.#e && T(this.#e, () => {
        this.#e = null;
      }), this.#a && (this.#t.before(this.#a), this.#a = null);
    }
  }
  /**
   * Update the source that powers `$effect.pending()` inside this boundary,
   * and controls when the current `pending` snippet (if any) is removed.
   * Do not call from inside the class
   * @param {1 | -1} d
   */
  update_pending_count(e) {
    this.#y(e), this.#u += e, this.#l && U(this.#l, this.#u);
  }
  get_effect_pending() {
    return this.#b(), $(
      /** @type {Source<number>} */
      this.#l
    );
  }
  /** @param {unknown} error */
  error(e) {
    var s = this.#i.onerror;
    let o = this.#i.failed;
    if (this.#c || !s && !o)
      throw e;
    this.#s && (R(this.#s), this.#s = null), this.#e && (R(this.#e), this.#e = null), this.#r && (R(this.#r), this.#r = null);
    var a = !1, i = !1;
    const c = () => {
      if (a) {
        ie();
        return;
      }
      a = !0, i && z(), b.ensure(), this.#u = 0, this.#r !== null && T(this.#r, () => {
        this.#r = null;
      }), this.is_pending = this.has_pending_snippet(), this.#s = this.#p(() => (this.#c = !1, u(() => this.#f(this.#t)))), this.#h > 0 ? this.#g() : this.is_pending = !1;
    };
    var f = F;
    try {
      g(null), i = !0, s?.(e, c), i = !1;
    } catch (h) {
      k(h, this.#n && this.#n.parent);
    } finally {
      g(f);
    }
    o && W(() => {
      this.#r = this.#p(() => {
        b.ensure(), this.#c = !0;
        try {
          return u(() => {
            o(
              this.#t,
              () => e,
              () => c
            );
          });
        } catch (h) {
          return k(
            h,
            /** @type {Effect} */
            this.#n.parent
          ), null;
        } finally {
          this.#c = !1;
        }
      });
    });
  }
}
const oe = /* @__PURE__ */ new Set(), B = /* @__PURE__ */ new Set();
let C = null;
function m(t) {
  var e = this, s = (
    /** @type {Node} */
    e.ownerDocument
  ), o = t.type, a = t.composedPath?.() || [], i = (
    /** @type {null | Element} */
    a[0] || t.target
  );
  C = t;
  var c = 0, f = C === t && t.__root;
  if (f) {
    var h = a.indexOf(f);
    if (h !== -1 && (e === document || e === /** @type {any} */
    window)) {
      t.__root = e;
      return;
    }
    var _ = a.indexOf(e);
    if (_ === -1)
      return;
    h <= _ && (c = h);
  }
  if (i = /** @type {Element} */
  a[c] || t.target, i !== e) {
    G(t, "currentTarget", {
      configurable: !0,
      get() {
        return i || s;
      }
    });
    var S = F, l = E;
    g(null), w(null);
    try {
      for (var n, r = []; i !== null; ) {
        var d = i.assignedSlot || i.parentNode || /** @type {any} */
        i.host || null;
        try {
          var v = i["__" + o];
          v != null && (!/** @type {any} */
          i.disabled || // DOM could've been updated already by the time this is reached, so we check this as well
          // -> the target could not have been disabled because it emits the event in the first place
          t.target === i) && v.call(i, t);
        } catch (y) {
          n ? r.push(y) : n = y;
        }
        if (t.cancelBubble || d === e || d === null)
          break;
        i = d;
      }
      if (n) {
        for (let y of r)
          queueMicrotask(() => {
            throw y;
          });
        throw n;
      }
    } finally {
      t.__root = e, delete t.currentTarget, g(S), w(l);
    }
  }
}
const he = ["touchstart", "touchmove"];
function le(t) {
  return he.includes(t);
}
function _e(t, e) {
  return fe(t, e);
}
const p = /* @__PURE__ */ new Map();
function fe(t, { target: e, anchor: s, props: o = {}, events: a, context: i, intro: c = !0 }) {
  J();
  var f = /* @__PURE__ */ new Set(), h = (l) => {
    for (var n = 0; n < l.length; n++) {
      var r = l[n];
      if (!f.has(r)) {
        f.add(r);
        var d = le(r);
        e.addEventListener(r, m, { passive: d });
        var v = p.get(r);
        v === void 0 ? (document.addEventListener(r, m, { passive: d }), p.set(r, 1)) : p.set(r, v + 1);
      }
    }
  };
  h(K(oe)), B.add(h);
  var _ = void 0, S = ee(() => {
    var l = s ?? e.appendChild(D());
    return re(
      /** @type {TemplateNode} */
      l,
      {
        pending: () => {
        }
      },
      (n) => {
        if (i) {
          te({});
          var r = (
            /** @type {ComponentContext} */
            I
          );
          r.c = i;
        }
        a && (o.$$events = a), _ = t(n, o) || {}, i && se();
      }
    ), () => {
      for (var n of f) {
        e.removeEventListener(n, m);
        var r = (
          /** @type {number} */
          p.get(n)
        );
        --r === 0 ? (document.removeEventListener(n, m), p.delete(n)) : p.set(n, r);
      }
      B.delete(h), l !== s && l.parentNode?.removeChild(l);
    };
  });
  return N.set(_, S), _;
}
let N = /* @__PURE__ */ new WeakMap();
function de(t, e) {
  const s = N.get(t);
  return s ? (N.delete(t), s(e)) : Promise.resolve();
}
const ue = "5";
typeof window < "u" && ((window.__svelte ??= {}).v ??= /* @__PURE__ */ new Set()).add(ue);
const pe = /* @__PURE__ */ Object.freeze(/* @__PURE__ */ Object.defineProperty({
  __proto__: null
}, Symbol.toStringTag, { value: "Module" }));
export {
  pe as SVELTE_VERSION,
  _e as mount,
  de as unmount
};
