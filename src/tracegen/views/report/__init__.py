"""`tracegen report`: one self-contained HTML page of plots, tables and a trace browser."""

from tracegen.views.report.build import report_command

__all__ = ["report_command"]
