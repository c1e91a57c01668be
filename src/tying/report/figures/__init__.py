"""One module per figure: load tidy Parquet, one seaborn call, save a vector PDF."""
