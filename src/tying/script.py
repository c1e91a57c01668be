"""Old name of tying.rule_script, kept only until workflow/scripts/lens.py imports the new one; then delete."""
from tying.rule_script import run  # noqa: F401
