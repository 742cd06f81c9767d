"""The read-only web page: GPU map, falsely starved jobs, history, plans (``docs/web.md``).

Modules, one job each:

* :mod:`.payload` — snapshots, metrics, history and plans as the JSON the page reads;
* :mod:`.sources` — where they come from: a snapshot file or a database (the service's);
* :mod:`.pages` — the routes (static files and ``/api/*``) for
  :class:`~slurm_defrag.service.http.ControlServer`;
* ``static/`` — ``index.html``, ``app.js``, ``style.css``: plain files, no build step, no
  CDN, so the page works on an offline controller.
"""
