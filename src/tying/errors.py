"""The one error type the workflow reports as a single line."""


class PipelineError(RuntimeError):
    """A user-facing problem (bad config, missing input); printed as one line, no traceback."""
