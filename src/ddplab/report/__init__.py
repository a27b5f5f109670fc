"""The views of records: what a report looks like to a reader, drawn from the records alone.

    page.py             report.html: one self-contained page of any report, from the Jinja2 templates in
                        templates/ with autoescape on (the one place a value becomes HTML)
    summary.py          the page's first screen as data: the verdict, the findings, the key figures
    charts.py           the figures a record offers (records/figures.py), drawn as inline SVG on scales.py's axes
    launch_figures.py   what the page draws for a `ddplab launch` job; flight_timeline.py its collectives per rank,
                        and the same as a trace-event file beside the page
    terminal.py         the terminal's tables and lines (rich); progress.py the line naming the running stage

Nothing here measures or launches: reading a report and drawing it imports the records, never the lab.
"""
