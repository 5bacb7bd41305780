"""The Data page's "Large files (streamed to disk)" uploader (issue 16, item 3).

A Streamlit custom component (``st.components.v2``, inline HTML/JS) with a file input: each
chosen file is sent by ``XMLHttpRequest`` ``PUT`` to this session's streamed-upload route
(:mod:`analytics.ui.upload_route`), with a progress bar per file; when every file has finished,
the component reports ``[{"id", "name", "bytes"}]`` (or ``{"name", "error"}``) once, as the
trigger value ``uploaded``. :func:`large_uploader` turns the ids into the files on disk that
this session uploaded (a browser can only name its own session's files) and the refusals.
The route is served by the ASGI entry ``serve.py`` (``make run``); under a bare
``streamlit run app.py`` the widget says so instead of uploading.
"""

from __future__ import annotations

import streamlit as st

from analytics.ui import upload_route

_HTML = """
<div class="hr-up">
  <input type="file" multiple data-testid="hr-large-upload-input"
         accept=".csv,.gz,.jsonl,.json,.epw,.parquet,.prom,.txt">
  <div class="hr-list"></div>
</div>
"""

_CSS = """
.hr-up { font-family: var(--st-font); font-size: 0.9rem; }
.hr-row { display: flex; gap: 0.6rem; align-items: center; margin-top: 0.3rem; }
.hr-row progress { width: 12rem; }
"""

_JS = """
export default function(component) {
  const { data, setTriggerValue, parentElement } = component;
  const input = parentElement.querySelector('input[type=file]');
  const list = parentElement.querySelector('.hr-list');
  const mb = (n) => (n / 1e6).toFixed(1) + ' MB';
  const put = (file, bar, note) => new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', data.url + '/' + encodeURIComponent(file.name));
    xhr.upload.onprogress = (e) => { bar.value = e.loaded; note.textContent = mb(e.loaded) +
      ' / ' + mb(file.size); };
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = {}; }
      if (xhr.status === 200 && body.id) {
        bar.value = bar.max; note.textContent = 'uploaded, ' + mb(body.bytes);
        resolve({ id: body.id, name: file.name, bytes: body.bytes });
      } else {
        const why = xhr.status === 404 ? 'the streamed-upload route is not served here: ' +
          'start the app with make run (streamlit run serve.py)' :
          (body.error || ('HTTP ' + xhr.status));
        note.textContent = 'refused: ' + why;
        resolve({ name: file.name, error: why });
      }
    };
    xhr.onerror = () => { note.textContent = 'network error';
      resolve({ name: file.name, error: 'network error' }); };
    xhr.send(file);
  });
  input.onchange = async () => {
    const files = [...input.files];
    if (!files.length) return;
    input.disabled = true;
    list.replaceChildren();
    const done = [];
    for (const file of files) {
      const row = document.createElement('div');
      row.className = 'hr-row';
      row.dataset.testid = 'hr-large-upload-row';
      const label = document.createElement('span');
      label.textContent = file.name;
      const bar = document.createElement('progress');
      bar.max = Math.max(file.size, 1); bar.value = 0;
      const note = document.createElement('span');
      row.append(label, bar, note);
      list.appendChild(row);
      if (file.size > data.cap_bytes) {
        const why = 'larger than the upload cap (' + mb(data.cap_bytes) + ')';
        note.textContent = 'refused: ' + why;
        done.push({ name: file.name, error: why });
        continue;
      }
      done.push(await put(file, bar, note));
    }
    input.value = '';
    input.disabled = false;
    setTriggerValue('uploaded', done);
  };
}
"""

_uploader = st.components.v2.component("headroom_large_upload", html=_HTML, css=_CSS, js=_JS)


def plain_cap_mb() -> int:
    """The plain uploader's cap in MB (:func:`analytics.ui.upload_route.plain_upload_mb`)."""
    return upload_route.plain_upload_mb()


def cap_mb() -> int:
    """The streamed uploader's cap in MB (``server.maxUploadSize``)."""
    from streamlit import config

    return int(config.get_option("server.maxUploadSize"))


def large_uploader(key: str) -> tuple[list[upload_route.Staged], list[dict]]:
    """Draw the large-file uploader; returns ``(staged, refused)``: the files this session
    finished uploading since the last run (:class:`analytics.ui.upload_route.Staged`, on disk;
    the caller ingests and deletes them) and ``{"name", "error"}`` for each file the route
    refused (over the cap, token expired, network). Both empty on most runs."""
    from streamlit import config

    token = upload_route.TOKENS.issue(st.session_state.get("_large_upload_token"))
    st.session_state["_large_upload_token"] = token
    cap = int(config.get_option("server.maxUploadSize")) * 1024 * 1024
    result = _uploader(key=key, data={"url": f"/headroom/upload/{token}", "cap_bytes": cap},
                       on_uploaded_change=lambda: None)
    reported = [r for r in (result.get("uploaded") or []) if isinstance(r, dict)]
    staged = upload_route.TOKENS.take(token, [r.get("id") for r in reported])
    refused = [{"name": str(r.get("name", "?")), "error": str(r.get("error"))}
               for r in reported if r.get("error")]
    return staged, refused
