/* Search for the site opened from disk. A page loaded from file:// may not start a web worker,
 * so under file:// the search worker runs in a hidden frame of the page's own origin instead:
 * `Worker` is replaced by FrameWorker, which loads the worker's script into the frame and
 * passes messages both ways. Served over http(s), nothing changes. */
(function () {
  "use strict";
  if (location.protocol !== "file:" || typeof EventTarget !== "function") return;
  var count = 0;

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      var worker = this;
      var id = "__pgjaxFrameWorker" + count++;
      this.onmessage = null;
      this.onerror = null;
      this._pending = [];
      this._scope = null;
      window[id] = function (data) {  // the worker's postMessage, to the page
        var event = new MessageEvent("message", { data: data });
        worker.dispatchEvent(event);
        if (typeof worker.onmessage === "function") worker.onmessage(event);
      };
      window[id + "Ready"] = function (scope) {
        worker._scope = scope;
        worker._pending.splice(0).forEach(function (data) { worker._send(data); });
      };
      var src = new URL(url, location.href).href.replace(/"/g, "&quot;");
      var frame = document.createElement("iframe");
      frame.hidden = true;
      frame.tabIndex = -1;
      frame.setAttribute("aria-hidden", "true");
      frame.srcdoc =
        "<script>self.postMessage = function (d) { parent." + id + "(d); };" +
        "self.importScripts = function () { throw new Error('importScripts: not offline'); };" +
        "<\/script><script src=\"" + src + "\"><\/script>" +
        "<script>parent." + id + "Ready(self);<\/script>";
      (document.body || document.documentElement).appendChild(frame);
      this._frame = frame;
    }

    _send(data) {
      var scope = this._scope;
      scope.dispatchEvent(new scope.MessageEvent("message", { data: data }));
    }

    postMessage(data) {
      if (this._scope) this._send(data);
      else this._pending.push(data);
    }

    terminate() {
      this._frame.remove();
    }
  }

  window.Worker = FrameWorker;
})();
