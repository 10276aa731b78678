extension LivePage {
    /// The page's style: the upload page's colours (WCAG AA contrast in both schemes), its
    /// focus ring, and tables that stack on narrow screens.
    static let css = #"""
:root {
  color-scheme: light dark;
  --fg: #1a1a1a; --muted: #4d5561; --bg: #ffffff; --panel: #f4f6f9; --line: #c9d0da;
  --accent: #0b57d0; --accent-fg: #ffffff; --accent-soft: #e3ecfb; --ok: #146c2e;
  --error: #b3261e; --error-soft: #fdecea; --focus: #b45309; --track: #dde3ea;
}
@media (prefers-color-scheme: dark) {
  :root {
    --fg: #e8eaed; --muted: #b4bac3; --bg: #16181b; --panel: #1f2226; --line: #3b4149;
    --accent: #8ab4f8; --accent-fg: #0b1a33; --accent-soft: #1d2a40; --ok: #7dd492;
    --error: #f2a29b; --error-soft: #3a1f1d; --focus: #fbbf24; --track: #33383f;
  }
}
* { box-sizing: border-box; }
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); line-height: 1.5; }
main { max-width: 72rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
h1 { font-size: 1.8rem; margin: 0; }
h2 { font-size: 1.15rem; margin: 2rem 0 .6rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
a { color: var(--accent); }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9em; background: var(--panel); padding: 0 .25rem; border-radius: .2rem; }
pre { background: var(--panel); padding: .7rem .9rem; border-radius: .4rem; overflow-x: auto; }
pre code { padding: 0; }
.vh { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.hint { font-weight: 400; color: var(--muted); font-size: .9rem; }
.empty { color: var(--muted); margin: 0; }
.error { color: var(--error); font-weight: 600; margin: .4rem 0; }
.error:empty { display: none; }
.tally { font-weight: 400; color: var(--muted); font-size: .95rem; }

.top { display: flex; flex-wrap: wrap; gap: .5rem 1.2rem; align-items: baseline; justify-content: space-between; }
.status { margin: 0; padding: .15rem .7rem; border-radius: 1rem; border: 1px solid var(--line); font-size: .95rem; }
.status::before { content: "● "; }
.status[data-state=live] { color: var(--ok); border-color: var(--ok); }
.status[data-state=connecting] { color: var(--muted); }
.status[data-state=lost] { color: var(--error); border-color: var(--error); background: var(--error-soft); }

button, input, select { font: inherit; color: inherit; }
button { border-radius: .35rem; cursor: pointer; padding: .35rem .9rem; background: var(--bg); border: 1px solid var(--muted); }
button:hover { border-color: var(--fg); }
button.primary { background: var(--accent); color: var(--accent-fg); border-color: var(--accent); font-weight: 600; }
button[aria-pressed=true] { background: var(--accent-soft); border-color: var(--accent); }
input, select { padding: .4rem .5rem; background: var(--bg); border: 1px solid var(--muted); border-radius: .35rem; min-width: 0; }

.transfers { list-style: none; margin: 0; padding: 0; display: grid; gap: .6rem; }
.transfer { border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: .5rem; padding: .55rem .8rem; }
.transfer[data-state=ended] { border-left-color: var(--ok); }
.transfer[data-state=cut] { border-left-color: var(--error); background: var(--error-soft); }
.transfer-head, .transfer-foot { display: flex; gap: .8rem; align-items: baseline; justify-content: space-between; flex-wrap: wrap; }
.transfer-name { font-weight: 600; overflow-wrap: anywhere; }
.transfer-foot { color: var(--muted); font-size: .95rem; font-variant-numeric: tabular-nums; }
progress { display: block; width: 100%; height: .6rem; margin: .4rem 0 .3rem; appearance: none; -webkit-appearance: none; border: 0; border-radius: .3rem; background: var(--track); overflow: hidden; }
progress::-webkit-progress-bar { background: var(--track); border-radius: .3rem; }
progress::-webkit-progress-value { background: var(--accent); border-radius: .3rem; transition: width .2s; }
progress::-moz-progress-bar { background: var(--accent); border-radius: .3rem; }
[data-state=ended] progress::-webkit-progress-value, [data-state=completed] progress::-webkit-progress-value { background: var(--ok); }
[data-state=ended] progress::-moz-progress-bar, [data-state=completed] progress::-moz-progress-bar { background: var(--ok); }
[data-state=cut] progress::-webkit-progress-value { background: var(--error); }
td progress { margin: .3rem 0; min-width: 6rem; }

.arm { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: flex-start; background: var(--panel); padding: .8rem; border-radius: .5rem; }
.field { display: flex; flex-direction: column; gap: .2rem; }
.field label { font-weight: 600; }
.field.wide { flex: 1 1 12rem; }
.field.submit { align-self: center; }
.field input[type=number] { width: 6rem; }

.log-tools { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.log-tools label { font-weight: 600; }
.log-tools input { flex: 1 1 16rem; }
#log-more { margin-top: .6rem; }

.grid { width: 100%; border-collapse: collapse; font-size: .92rem; }
.grid th, .grid td { text-align: left; vertical-align: top; padding: .35rem .5rem; border-bottom: 1px solid var(--line); }
.grid tbody tr:nth-child(even) { background: var(--panel); }
.grid .n { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.grid .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .85rem; overflow-wrap: anywhere; }
.log td.path { width: 100%; overflow-wrap: anywhere; }
.log td.time, .log td.fault { white-space: nowrap; }
.log .open { background: none; border: 0; padding: 0; color: var(--accent); text-decoration: underline; text-align: left; overflow-wrap: anywhere; }
.log tr[data-class="4"] .status-code, .log tr[data-class="5"] .status-code, .log tr[data-hung-up] .status-code { color: var(--error); font-weight: 600; }
.log tr.selected { outline: 2px solid var(--accent); outline-offset: -2px; }

.details { margin-top: 1.5rem; border: 1px solid var(--line); border-radius: .5rem; padding: 0 1rem 1rem; }
.summary { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
.summary dt { color: var(--muted); }
.summary dd { margin: 0; overflow-wrap: anywhere; }
#details-close { margin-top: 1rem; }

@media (max-width: 40rem) {
  main { padding: 1rem .8rem 2rem; }
  h1 { font-size: 1.5rem; }
  .grid thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  .grid, .grid tbody, .grid tr, .grid td { display: block; width: 100%; }
  .grid tr { border: 1px solid var(--line); border-radius: .5rem; margin-bottom: .5rem; padding: .2rem 0; }
  .grid td { border: 0; padding: .1rem .7rem; }
  .grid .n { text-align: left; }
  .grid td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-family: system-ui, sans-serif; font-size: .85rem; }
  .log td.path { width: 100%; }
}
@media (prefers-reduced-motion: reduce) {
  progress::-webkit-progress-value { transition: none; }
}
"""#
}
