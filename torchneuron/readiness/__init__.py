"""`torchneuron readiness`: one command runs a script unchanged on the software NeuronCore and
reports what would happen on Trainium, in the terminal, as JSON and as an HTML page
(docs/readiness.md#the-readiness-command).

- `cli.py`: the subcommand: starts the child, prints the summary, sets the exit status.
- `child.py`: the child process: runs the script with the accounting on and writes the report.
- `steps.py`: the step watcher: where steps end, their times, one step's ops at real shapes.
- `report.py`: the report: the time model's estimate, the per-op table, the five changes, the
  terminal lines and the comparison of two reports.
- `html_page.py`: the report as a self-contained HTML page."""
