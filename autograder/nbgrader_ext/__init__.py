"""nbgrader extensions: the preprocessors the course plugs into nbgrader's autograde and feedback."""
