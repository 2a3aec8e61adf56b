"""The tasks a kbert head is trained and run for, by name: one vocabulary for `--task`, a run
folder's task.json, the task metrics and the precision choice. Plain Python, read while `kbert
--help` builds its parser."""

# One label set per text or text pair (BertClassifier): what TextPredictor and int8 run.
SEQUENCE_TASKS = ("classification", "pair", "multilabel")
# With a label per wordpiece (BertTokenClassifier) and an answer span (BertSpanLabeler).
TASKS = SEQUENCE_TASKS + ("tagging", "squad")
