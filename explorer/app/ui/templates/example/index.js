import { g as u, i, T as s, a as f, t as o, p as d, b as c, s as m, c as v } from "./render-Btl2mdsj.js";
function _(t) {
  var e = document.createElement("template");
  return e.innerHTML = t.replaceAll("<!>", "<!---->"), e.content;
}
function p(t, e) {
  var r = (
    /** @type {Effect} */
    f
  );
  r.nodes === null && (r.nodes = { start: t, end: e, a: null, t: null });
}
// @__NO_SIDE_EFFECTS__
function h(t, e) {
  var r = (e & s) !== 0, a, l = !t.startsWith("<!>");
  return () => {
    a === void 0 && (a = _(l ? t : "<!>" + t), a = /** @type {TemplateNode} */
    u(a));
    var n = (
      /** @type {TemplateNode} */
      r || i ? document.importNode(a, !0) : a.cloneNode(!0)
    );
    return p(n, n), n;
  };
}
function x(t, e) {
  t !== null && t.before(
    /** @type {Node} */
    e
  );
}
var E = /* @__PURE__ */ h('<div class="example svelte-1uec0xe"> </div>');
function g(t, e) {
  c(e, !0);
  var r = E(), a = v(r);
  o(() => m(a, e.value ? `layer ${e.value.layer ?? 0}, head ${e.value.head ?? 0}` : "")), x(t, r), d();
}
export {
  g as default
};
