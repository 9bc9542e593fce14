"""What workflows and activities share: inputs and results, activity names and references, error types, retry
policies, search attributes. Plain definitions: imports nothing of the project but other contracts.
"""
