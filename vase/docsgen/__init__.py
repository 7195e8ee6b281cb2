"""The generated pages of the docs: the configuration reference (`config_reference`: every key of every config
file, and the groups table of docs/configuration.md), the troubleshooting page (`troubleshooting`: the symptoms of
`symptoms`, then the code's error sites), and how the API pages render docstrings (`docstrings`, a Griffe
extension). ``make docs`` checks that the pages are what the code and conf/ say."""
