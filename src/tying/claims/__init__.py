"""The paper's claims as statistics with verdicts, by exposure, over training, over scale, in the survey."""
