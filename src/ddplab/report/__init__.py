"""The views of records: what a report looks like to a reader, drawn from the records alone: page.py (report.html,
from the Jinja2 templates), summary.py (its first screen as data), charts.py (inline SVG and its axes),
flight_timeline.py (a `ddplab launch` job), terminal.py and progress.py (the terminal).
Nothing here measures or launches: reading a report and drawing it imports the records, never the lab.
"""
