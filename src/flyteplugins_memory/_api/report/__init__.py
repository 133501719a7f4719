"""`store.report()`: gathering a store into a snapshot (`build`) and rendering it as HTML (`html`,
styles in ``report.css``).
"""
