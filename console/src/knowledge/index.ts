// The knowledge pages of the console and the file preview the chat uses for citations.
export { KnowledgeBasesPage } from './KnowledgeBasesPage'
export { KnowledgeBasePage } from './KnowledgeBasePage'
export { FilePreview } from './FilePreview'
