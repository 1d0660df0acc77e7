// What the tests share: the tool every tools test offers, and what it
// answers.

/** The text the tool returns: a test finds it in what the provider was sent, and in the answer. */
export const toolResult = 'sunny, 21 degrees (tool result 7f3a)';

/** get_weather: no required parameter, so any object the fake writes as its arguments is valid. */
const parameters = {
  type: 'object',
  properties: { city: { type: 'string', description: 'the city' } },
  additionalProperties: false,
};

export const weatherTool = {
  name: 'get_weather',
  description: 'The current weather in a city.',
  parameters,
  /** As openai-node and OpenAI's HTTP API take it. */
  openai: {
    type: 'function',
    function: { name: 'get_weather', description: 'The current weather in a city.', parameters },
  },
};

