/* The script editor's buttons (F-02 `script`, jobs/admin/scripts.py).
 *
 * Check: posts the editor's text to check-script/, which compiles it
 * without running it; shows "compiles" or the error, and marks the error's
 * line in the editor's gutter.
 * Run now: runs the saved script; while the editor holds unsaved changes
 * it is disabled, with a note to save first.
 * An editor in a folded section is sized again when the section opens.
 */
(function () {
  "use strict";

  // takt/admin.js's texts (the page loads it first), looked up when used.
  function gettext(text) { return window.Takt.i18n.gettext(text); }

  function csrfToken(element) {
    var form = element.closest("form");
    var input = form && form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function setUp(tools) {
    var box = tools.previousElementSibling;
    var widget = box && box.querySelector(".django-ace-widget");
    var textarea = box && box.querySelector("textarea");
    var result = tools.querySelector(".takt-script-result");
    var check = tools.querySelector(".takt-script-check");
    var runNow = tools.querySelector("button[type=submit]");
    if (!widget || !textarea || !widget.editor) {
      return false; // django-ace has not made the editor yet
    }
    var editor = widget.editor;
    var saved = editor.getValue();

    function show(ok, text) {
      result.textContent = text;
      result.className = "takt-script-result " + (ok ? "takt-script-ok" : "takt-script-error");
    }

    check.addEventListener("click", function () {
      var body = new FormData();
      body.append("script", editor.getValue());
      show(true, gettext("checking…"));
      fetch(tools.dataset.checkUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(tools) },
      })
        .then(function (response) {
          if (!response.ok) {
            throw new Error(window.Takt.i18n.interpolate(gettext("the check answered %(status)s"), { status: response.status }));
          }
          return response.json();
        })
        .then(function (answer) {
          show(answer.ok, answer.message);
          var marks = [];
          if (!answer.ok && answer.line) {
            marks.push({
              row: answer.line - 1,
              column: Math.max(0, (answer.column || 1) - 1),
              text: answer.message,
              type: "error",
            });
            editor.gotoLine(answer.line, Math.max(0, (answer.column || 1) - 1), true);
          }
          editor.getSession().setAnnotations(marks);
        })
        .catch(function (error) {
          show(false, String(error.message || error));
        });
    });

    if (runNow) {
      var note = document.createElement("span");
      note.className = "takt-script-unsaved";
      tools.insertBefore(note, result);
      editor.getSession().on("change", function () {
        var changed = editor.getValue() !== saved;
        runNow.disabled = changed;
        note.textContent = changed ? gettext("unsaved changes: save first, Run now runs the saved script") : "";
      });
    }

    var section = tools.closest("details");
    if (section) {
      section.addEventListener("toggle", function () {
        editor.resize();
      });
    }
    return true;
  }

  function init() {
    document.querySelectorAll(".takt-script-tools").forEach(function (tools) {
      if (tools.dataset.ready) {
        return;
      }
      if (setUp(tools)) {
        tools.dataset.ready = "1";
      } else {
        window.setTimeout(init, 50); // after django-ace's own load handler
      }
    });
  }

  window.addEventListener("load", function () {
    window.setTimeout(init, 0);
  });
})();
