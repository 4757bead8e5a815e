//! The console's one script, served from its own path so that the pages' Content-Security-
//! Policy can forbid every inline script: a page marked `data-refresh` reloads its `main`
//! every few seconds, only while its tab is shown and no field of it is being edited.

use axum::http::header;
use axum::response::IntoResponse;

const SCRIPT: &str = r#"(function () {
  const every = Number(document.body.dataset.refresh || 0);
  if (!every) { return; }
  async function refresh() {
    if (document.visibilityState !== 'visible') { return; }
    const active = document.activeElement;
    if (active && active.closest('main') && active.matches('input, textarea, select')) { return; }
    try {
      const response = await fetch(location.href, { credentials: 'same-origin' });
      if (!response.ok) { return; }
      const fresh = new DOMParser().parseFromString(await response.text(), 'text/html');
      const main = fresh.querySelector('main');
      if (main) {
        document.querySelector('main').replaceWith(main);
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      }
    } catch (e) { /* the next tick tries again */ }
  }
  setInterval(refresh, every);
  document.addEventListener('visibilitychange', refresh);
})();
"#;

pub(crate) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}
